"""specpath-eagle3: EAGLE-3 drafting (and P-EAGLE parallel drafting) for specpath.

Importing the package stays light; the head and speculator (torch) load on first use.
"""
