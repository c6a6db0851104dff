"""A plugin that cannot even be imported."""

raise ImportError("this plugin needs a library that is not installed")
