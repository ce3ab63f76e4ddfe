"""Connecting, resolving and prefetching: the client library's C ABI (client/mxfp6_client.h)."""

import ctypes
import json
import os
import threading
import warnings

from . import _lib

RULES = ("exact", "nearest", "default", "pinned")
SOURCES = {0: "server", 1: "node cache", 2: "embedded"}



def _library_alive():
    """Whether the C library can still be called: at interpreter exit, module globals (_lib among
    them, and this function's own name) are cleared before the last objects are collected, and
    those have nothing to free. The __del__ methods hold it as a default argument."""
    return _lib is not None and getattr(_lib, "client", None) is not None

class ConnectError(ConnectionError):
    """Nothing can answer: no server reachable and no node cache, an unreadable database, a bad URI."""


class ResolveError(RuntimeError):
    """A key could not be resolved (unknown op, a family nothing was precompiled for ...)."""


class ShapeWarning(UserWarning):
    """A shape answered by the nearest tuned shape or the op's default plan, not by its own tuning."""


class PrefetchReport:
    """What a prefetch resolved and how: counts per rule, the keys of each, the failures."""

    def __init__(self, keys, rules, failed, status, source, seconds):
        self.keys = keys                      # every key asked for, in order
        self.rules = rules                    # key -> "exact" | "nearest" | "default" | "pinned"
        self.failed = failed                  # key -> why
        self.status, self.source, self.seconds = status, source, seconds
        self.counts = {r: sum(1 for v in rules.values() if v == r) for r in RULES}

    def __repr__(self):
        counts = ", ".join(f"{n} {r}" for r, n in self.counts.items())
        failed = f", {len(self.failed)} failed" if self.failed else ""
        return f"PrefetchReport({len(self.keys)} keys: {counts}{failed}; {self.status})"


class _Resolution:
    """Owns an mxc_resolution; ops created from it outlive it (mxc_op_create copies)."""

    def __init__(self, handle):
        self.handle = handle

    def __del__(self, _alive=_library_alive):
        if self.handle and _alive():
            _lib.client.mxc_resolution_free(self.handle)
            self.handle = None


class _Op:
    """One resolved key's plan (mxc_op) and the devices it is loaded on."""

    def __init__(self, key, rule, handle):
        self.key, self.rule, self.handle = key, rule, handle
        self.loaded = set()

    def plan(self):
        return _lib.text(_lib.client.mxc_op_plan(self.handle))

    def __del__(self, _alive=_library_alive):
        if self.handle and _alive():
            _lib.client.mxc_op_free(self.handle)
            self.handle = None


class Connection:
    def __init__(self, uri, cache_dir=None, deadline_ms=0):
        err = _lib.error_buffer()
        handle = _lib.client.mxc_connect(uri.encode(), cache_dir.encode() if cache_dir else None,
                                         int(deadline_ms), err, len(err))
        if not handle:
            raise ConnectError(f"mxfp6.connect({uri!r}): {_lib.text(err.value)}")
        self.uri, self.handle = uri, handle
        self._lock = threading.Lock()
        self._ops = {}            # key -> _Op
        self._call_keys = {}      # a call's signature (op, variant, target, shapes, scalars) -> key
        self._recipes = {}        # (call builder, its arguments' signature) -> _launch.Recipe
        self._warned = set()      # keys a ShapeWarning was given for
        self._failed = {}         # key -> why
        self._stats = {"resolves": 0, "keys": 0, "objects_from_server": 0, "bytes_from_server": 0,
                       "objects_from_cache": 0, "seconds": 0.0, "launches": 0}

    def close(self):
        if self.handle:
            self._ops.clear()
            self._call_keys.clear()
            self._recipes.clear()
            _lib.client.mxc_close(self.handle)
            self.handle = None

    def __del__(self, _alive=_library_alive):
        if getattr(self, "handle", None) and _alive():
            self.close()

    def describe(self):
        return _lib.text(_lib.client.mxc_describe(self.handle))

    def resolve(self, keys):
        """Resolves keys in one round trip; returns {key: rule} of those that resolved and
        {key: why} of those that did not, plus the resolution's status and source."""
        keys = list(dict.fromkeys(keys))
        array = (ctypes.c_char_p * len(keys))(*[k.encode() for k in keys])
        err = _lib.error_buffer()
        handle = _lib.client.mxc_resolve(self.handle, array, len(keys), err, len(err))
        if not handle:
            raise ResolveError(f"mxfp6: resolving {len(keys)} key(s): {_lib.text(err.value)}")
        resolution = _Resolution(handle)
        c = _lib.client
        rules, failed = {}, {}
        with self._lock:
            for i in range(c.mxc_op_count(handle)):
                key = _lib.text(c.mxc_op_key(handle, i))
                why = c.mxc_op_error(handle, i)
                if why is not None:
                    failed[key] = self._failed[key] = _lib.text(why)
                    continue
                rule = _lib.text(c.mxc_op_rule(handle, i))
                op = c.mxc_op_create(handle, i, err, len(err))
                if not op:
                    failed[key] = self._failed[key] = _lib.text(err.value)
                    continue
                rules[key] = rule
                self._ops[key] = _Op(key, rule, op)
                if rule in ("nearest", "default") and key not in self._warned:
                    self._warned.add(key)
                    warnings.warn(f"mxfp6: {key} has no tuning of its own; answered by {rule}: "
                                  f"{_lib.text(c.mxc_op_why(handle, i))}", ShapeWarning, stacklevel=3)
            s = self._stats
            s["resolves"] += 1
            s["keys"] += len(keys)
            s["objects_from_server"] += c.mxc_objects_from_server(handle)
            s["bytes_from_server"] += c.mxc_bytes_from_server(handle)
            s["objects_from_cache"] += c.mxc_objects_from_cache(handle)
            s["seconds"] += c.mxc_seconds(handle)
        status = _lib.text(c.mxc_status(handle))
        source = SOURCES.get(c.mxc_source(handle), "?")
        seconds = c.mxc_seconds(handle)
        del resolution
        return rules, failed, status, source, seconds

    def prefetch(self, shapes, target="sm_90"):
        """Resolves (and keeps) a model's whole op set: `shapes` is a shape-set file (the JSON of
        ops/shape_set.h), its text or parsed dict, or a list of keys ("op/variant/target/sizes/M")."""
        keys = _keys_of(shapes, target)
        rules, failed, status, source, seconds = self.resolve(keys)
        return PrefetchReport(keys, rules, failed, status, source, seconds)

    def op(self, key):
        """The resolved op of a key, resolving it now when it was not prefetched."""
        op = self._ops.get(key)
        if op is None:
            _, failed, _, _, _ = self.resolve([key])
            if key in failed:
                raise ResolveError(f"mxfp6: {key}: {failed[key]}")
            op = self._ops[key]
        return op

    def stats(self):
        with self._lock:
            rules = {r: sum(1 for o in self._ops.values() if o.rule == r) for r in RULES}
            return dict(self._stats, source=self.describe(), ops=len(self._ops), rules=rules,
                        warned=sorted(self._warned), failed=dict(self._failed))


def _keys_of(shapes, target):
    if isinstance(shapes, (list, tuple)):
        return list(shapes)
    if isinstance(shapes, dict):
        text = json.dumps(shapes)
    elif isinstance(shapes, str) and shapes.lstrip().startswith("{"):
        text = shapes
    else:
        path = os.fspath(shapes)
        with open(path, encoding="utf-8") as f:
            text = f.read()
    return [k for k in _lib.out_text(_lib.client.mxc_shape_set_keys, text.encode(), target.encode()).split("\n") if k]


_current = None


def connect(uri, cache_dir=None, deadline_ms=0):
    """Connects to servers ("grpc://HOST:PORT[,HOST:PORT...]", tried in order, with a node cache
    in cache_dir) or a kernel database ("sqlite:///path/kernels.db"); the connection the ops use
    from now on. Raises ConnectError when nothing can answer."""
    global _current
    conn = Connection(uri, cache_dir, deadline_ms)
    _current = conn
    return conn


def connection():
    if _current is None:
        raise ConnectError("mxfp6: not connected: call mxfp6.connect(...) first")
    return _current


def prefetch(shapes, target="sm_90"):
    return connection().prefetch(shapes, target)


def stats():
    """Resolves, keys, bytes and objects fetched, ops held per rule, the keys warned about."""
    return connection().stats()
