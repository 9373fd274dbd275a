"""specpath-dspark: DSpark drafting for specpath, method ``dspark`` (the DFlash backbone in
anchor-first layout, a Markov head and a confidence head for adaptive verification).

Importing this package stays light (no torch).
"""

from specpath_dspark.config import DSPARK_CHECKPOINT, DSparkSpeculatorConfig

__all__ = ["DSPARK_CHECKPOINT", "DSparkSpeculatorConfig"]
