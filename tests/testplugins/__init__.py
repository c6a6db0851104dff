"""Plugins used by the tests, loaded with ``-p tests.testplugins.NAME``."""
