"""Loading what ``opgate serve`` serves: ``MODULE[:ATTR]``, ``PATH.py[:ATTR]`` or a
package's folder, and calling the factory it may name.

The target (and ``--token-verifier``) is imported as a module, the working directory
importable, or loaded from a file (as its module when the file is in a package). Every
way an import or a factory can fail becomes one ``UsageError`` that says where Python
looked.
"""

from __future__ import annotations

import importlib
import inspect
import os
import sys
import traceback
from typing import Any

from ._escapes import visible
from ._logging import serve_logger
from ._usage import UsageError

__all__ = ["call_factory", "load"]


def load(spec: str, what: str, *, find: bool = False) -> Any:
    """The object ``MODULE:ATTR`` or ``PATH.py:ATTR`` names (``ATTR`` may be dotted).

    A spec ending in ``.py``, or naming an existing file, is loaded from that file (see
    ``_import_file``); a path to a package's folder names its ``__init__.py``; anything
    else is imported as a module, the working directory importable. With ``find``,
    ``:ATTR`` may be left out: the one ``Registry`` or ``GatewayServer`` the module
    defines at its top level is returned (a registry a gateway there serves counts as
    that gateway). Every failure to import is one ``UsageError`` naming the working
    directory and the search path; the traceback goes to the ``opgate.serve`` log at DEBUG.
    """
    source, attribute, is_file = _split_spec(spec)
    if not source or (not attribute and not find):
        raise UsageError(
            f"{what} must be MODULE:ATTR or PATH.py:ATTR, for example myapp.catalog:registry "
            "or app.py:registry"
        )
    module = _import_file(source) if is_file else _import_module(source)
    if not attribute:
        return _find_served(module, source)
    value: Any = module
    for part in attribute.split("."):
        try:
            value = getattr(value, part)
        except AttributeError:
            raise UsageError(f"{source!r} has no attribute {attribute!r}") from None
    return value


def _is_path(spec: str) -> bool:
    """Whether a spec names a file (or a folder, by a path) rather than a module."""
    if spec.endswith(".py") or os.path.isfile(spec):
        return True
    return os.path.isdir(spec) and any(sep in spec for sep in (os.sep, os.altsep) if sep)


def _split_spec(spec: str) -> tuple[str, str, bool]:
    """``(module or path, attribute or "", is a file)`` of a ``--target``-style spec."""
    if _is_path(spec):
        return spec, "", True
    head, separator, tail = spec.rpartition(":")
    if separator and _is_path(head):
        return head, tail, True
    module, _, attribute = spec.partition(":")
    return module, attribute, False


def _import_module(name: str) -> Any:
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        return importlib.import_module(name)
    except Exception as exc:
        raise _import_failure(repr(name), exc) from None


def _import_file(source: str) -> Any:
    """The module of the file ``source``, executed once however often it is named.

    The file is the real one, as ``python FILE`` resolves it (a symlink's target). A
    file in a package (its folder has an ``__init__.py``) is imported as its module,
    ``pkg.sub.app``, with the top package's parent first on ``sys.path``, so that its
    relative imports work; any other file is executed with its own folder first on
    ``sys.path``, so that its sibling modules import.
    """
    import hashlib
    import importlib.machinery
    import importlib.util

    if os.path.isdir(source):
        if not os.path.isfile(os.path.join(source, "__init__.py")):
            raise UsageError(
                f"{source} is a folder without __init__.py: name the file to serve, as "
                f"{os.path.join(source, 'app.py')}"
            )
        source = os.path.join(source, "__init__.py")
    if not os.path.isfile(source):
        raise UsageError(f"no such file: {source} (working directory: {os.getcwd()})")
    # One file named by two paths (a symlink, a relative path) is still one module.
    path = os.path.realpath(source)
    package = _package_of(path)
    if package is not None:
        return _import_in_package(source, path, *package)
    directory = os.path.dirname(path)
    if sys.path[:1] != [directory]:
        sys.path.insert(0, directory)
    stem = os.path.splitext(os.path.basename(path))[0]
    # Under its own name when free, so that a sibling importing it gets this module; a
    # name already taken (a standard module, another file) gets a private one instead.
    for name in (stem, f"_opgate_file_{hashlib.sha256(path.encode()).hexdigest()[:16]}"):
        loaded = sys.modules.get(name)
        if loaded is not None and getattr(loaded, "__file__", None) == path:
            return loaded
        if loaded is None and name.isidentifier():
            break
    # The source loader explicitly: a file without the .py suffix is Python source too.
    loader = importlib.machinery.SourceFileLoader(name, path)
    spec = importlib.util.spec_from_file_location(name, path, loader=loader)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and pydantic look their module up there
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[name]
        raise _import_failure(source, exc) from None
    return module


def _package_of(path: str) -> tuple[str, str] | None:
    """``(dotted module name, folder holding the top package)`` of a file inside a
    package, or None for a file outside one (or under folders that are not names)."""
    directory, filename = os.path.split(path)
    stem, suffix = os.path.splitext(filename)
    if suffix != ".py":
        return None
    parts = [] if stem == "__init__" else [stem]
    packaged = False
    while os.path.isfile(os.path.join(directory, "__init__.py")):
        directory, package = os.path.split(directory)
        parts.insert(0, package)
        packaged = True
    if not packaged or not all(part.isidentifier() for part in parts):
        return None
    return ".".join(parts), directory


def _import_in_package(source: str, path: str, name: str, root: str) -> Any:
    """The module ``name`` of the package in ``root``, which must be the file ``path``."""
    top = name.partition(".")[0]
    loaded = sys.modules.get(top)
    if loaded is not None and os.path.join(root, top) not in map(
        os.path.realpath, getattr(loaded, "__path__", None) or ()
    ):
        raise UsageError(
            f"{source} is module {name} of the package at {os.path.join(root, top)}, but "
            f"another module is already named {top} ({getattr(loaded, '__file__', None)}): "
            "rename the package"
        )
    if sys.path[:1] != [root]:
        sys.path.insert(0, root)
    try:
        module = importlib.import_module(name)
    except Exception as exc:
        raise _import_failure(source, exc) from None
    found = getattr(module, "__file__", None)
    if found is None or os.path.realpath(found) != path:
        raise UsageError(
            f"{source} is module {name}, but {name} imports as {found} (an installed "
            f"package named {top}?): rename the package"
        )
    return module


def call_factory(factory: Any, spec: str) -> Any:
    """What the factory ``spec`` names returns; its failure is one ``UsageError``, as an
    import's is (a factory's own imports fail the same way)."""
    if inspect.iscoroutinefunction(factory):
        raise UsageError(
            f"{spec} is an async function: make the factory a plain function returning "
            "the registry (or build it at the module's top level)"
        )
    try:
        return factory()
    except Exception as exc:
        raise _import_failure(spec, exc, action="build") from None


def _import_failure(source: str, exc: Exception, *, action: str = "import") -> UsageError:
    """One message for a module that failed to import (or a factory to build): why,
    where, and the search path.

    MCP clients start servers from a directory and with an environment of their own, so
    the usual cause is a search path other than the one the user tried in a terminal.
    """
    serve_logger.debug("%s %s failed", action, source, exc_info=exc)
    if isinstance(exc, SyntaxError):
        reason = f"SyntaxError: {exc.msg} ({exc.filename}, line {exc.lineno})"
    else:
        reason = f"{type(exc).__name__}: {str(exc)[:300]}"
        frames = [
            frame
            for frame in traceback.extract_tb(exc.__traceback__)
            if not frame.filename.startswith("<") and frame.filename != __file__
        ]
        if frames:
            reason += f" ({frames[-1].filename}, line {frames[-1].lineno})"
    lines = [
        f"cannot {action} {source}: {''.join(map(visible, reason))}",
        f"  working directory: {os.getcwd()}",
        f"  python: {sys.executable}",
        "  search path (sys.path):",
        *(f"    {entry or '(the working directory)'}" for entry in sys.path),
        "An MCP client starts the server in its own directory with a reduced environment: "
        "give the file's full path, or set cwd and env (PYTHONPATH) in the client's "
        "configuration; --log-level DEBUG shows the traceback.",
    ]
    return UsageError("\n".join(lines))


def _find_served(module: Any, source: str) -> Any:
    """The one ``Registry`` or ``GatewayServer`` at the top level of ``module``."""
    from .. import Operation, Registry
    from ..mcp import GatewayServer

    names: dict[int, list[str]] = {}
    objects: dict[int, Any] = {}
    for name, value in vars(module).items():
        if isinstance(value, Registry | GatewayServer):
            names.setdefault(id(value), []).append(name)
            objects[id(value)] = value
    for value in list(objects.values()):
        if isinstance(value, GatewayServer):
            objects.pop(id(value.registry), None)  # the gateway serves it
    if len(objects) == 1:
        return next(iter(objects.values()))
    if objects:
        found = ", ".join(names[key][0] for key in objects)
        raise UsageError(
            f"{source} defines several registries or servers ({found}): name the one "
            f"to serve, as {source}:{names[next(iter(objects))][0]}"
        )
    operations = [name for name, value in vars(module).items() if isinstance(value, Operation)]
    functions = [
        name
        for name, value in vars(module).items()
        if callable(value)
        and not isinstance(value, Operation | type)
        and getattr(value, "__module__", None) == module.__name__
        and not name.startswith("_")
    ]
    defined = []
    if operations:
        defined.append(f"operations {', '.join(operations)}")
    if functions:
        defined.append(f"functions {', '.join(functions)}")
    found = f"; it defines {' and '.join(defined)}" if defined else ""
    factory = functions[0] if functions else "build_registry"
    raise UsageError(
        f"{source} defines no Registry or GatewayServer at its top level{found}: add "
        "one (registry = Registry([...], LocalPolicy())), or name a function returning "
        f"one, as {source}:{factory}"
    )
