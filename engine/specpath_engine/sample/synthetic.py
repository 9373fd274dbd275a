"""Acceptance schedules for synthetic verification (lossy; for throughput studies).

The maths lives in :mod:`specpath.verification` (torch-free, shared with the config layer);
this module keeps the sampler's import path.
"""

from specpath.verification import acceptance_length_to_rates, check_rates, conditional_rates

__all__ = ["acceptance_length_to_rates", "check_rates", "conditional_rates"]
