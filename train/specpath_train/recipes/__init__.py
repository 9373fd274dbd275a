"""One training recipe per method (``python -m specpath_train.recipes.<method>``)."""
