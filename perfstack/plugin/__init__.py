"""The plugin API, one room: what a plugin is written against (``spec``: the hooks,
``mark``: the ``hookimpl`` mark, ``backend``: what a backend declares and is given,
``renderer``: the output formats' contract, ``calls``: the one helper that calls into a
plugin), then the host's side above them (``manager``: the loaded plugins and the calls into
them, ``load``: finding and loading plugins, ``host``: pluggy's side, ``cache``: what each
installed plugin provides, kept between commands, ``hookdoc``: the hook reference in
docs/plugins.md). The paths plugins were written against before this room,
``perfstack.backend``, ``perfstack.hookspecs``, ``perfstack.hookmark`` and
``perfstack.render.base``, still import the same objects."""
