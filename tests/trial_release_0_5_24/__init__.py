"""The template of a release folder that ``tests/test_trial_release.py`` builds at run time: the
files under ``files/`` are copied, with 0.5.23's declared flags and one added, into a temporary
folder ``sglang_0_5_24/`` found through ``SPECSTATE_RELEASE_PATH`` (they are not a package here:
their names end ``.py.txt``, so nothing imports or scans them in the repository)."""
