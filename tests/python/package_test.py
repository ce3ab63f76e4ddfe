"""The mxfp6 package without a GPU: install, import, connect, prefetch, argument validation.

usage: package_test.py [-v] MXFP6_SERVER LIB_DIR

Tensors are stand-ins with torch's attributes (device, dtype, shape, stride(), data_ptr()) at
made-up device addresses: the checks read only those, and nothing launches. Cases that need torch
itself are skipped, with the reason, where torch (>= 2.4 for the custom ops) is absent.
"""

import os
import shutil
import subprocess
import sys
import tempfile
import unittest
import warnings

SERVER, LIB_DIR = sys.argv[-2], sys.argv[-1]
del sys.argv[-2:]
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ["MXFP6_LIB_DIR"] = LIB_DIR
sys.path.insert(0, os.path.join(ROOT, "python"))

import mxfp6  # noqa: E402

try:
    import torch  # noqa: F401
    TORCH = True
except ImportError:
    TORCH = False

QKV_FWD = "norm_rope_qkv_fwd/H=2,layout=megatron/sm_90//128"
LN_FWD = "ln_modulate_fwd/S=32,layout=bsd/sm_90/D=3072/64"
SHAPES = """{"model": "test", "entries": [
 {"site": "a", "op": "norm_rope_qkv_fwd", "variant": {"layout": "megatron"}, "heads": 2, "tokens": [64]},
 {"site": "b", "op": "ln_modulate_fwd", "variant": {"layout": "bsd"}, "size": 3072, "tokens_per_sample": 32,
  "tokens": [64]}]}"""
# Every other op, for the checks of their calls (precompiled by the server on first resolve).
MORE_SHAPES = """{"model": "test, every op", "entries": [
 {"op": "norm_rope_qkv_bwd", "variant": {"layout": "megatron"}, "heads": 2, "tokens": [64]},
 {"op": "norm_rope_fwd", "heads": 2, "tokens": [64]},
 {"op": "norm_rope_bwd", "heads": 2, "tokens": [64]},
 {"op": "ln_modulate_bwd", "variant": {"layout": "bsd"}, "size": 3072, "tokens_per_sample": 32, "tokens": [64]},
 {"op": "ln_modulate_fwd_per_token", "size": 3072, "tokens": [64]},
 {"op": "ln_modulate_bwd_per_token", "size": 3072, "tokens": [64]},
 {"op": "mxfp6_pack_rows", "variant": {"FMT": "E3M2", "MODE": "RCEIL"}, "size": 3072, "tokens": [64]},
 {"op": "mxfp6_pack_cols", "variant": {"FMT": "E3M2", "MODE": "RCEIL"}, "size": 3072, "tokens": [64]},
 {"op": "mxfp6_pack_dual", "variant": {"FMT": "E3M2", "MODE": "RCEIL"}, "size": 3072, "tokens": [64]},
 {"op": "norm_rope_qkv_bwd_pack_bf16", "variant": {"FMT": "E3M2", "MODE": "RCEIL"}, "heads": 2, "tokens": [64]}]}"""


class Server:
    """build/bin/mxfp6-server --db DB --listen 127.0.0.1:0; the port from its first stdout line."""

    def __init__(self, db, log):
        self.log = open(log, "a")
        self.proc = subprocess.Popen([SERVER, "--db", db, "--listen", "127.0.0.1:0"], stdout=subprocess.PIPE,
                                     stderr=self.log, text=True)
        line = self.proc.stdout.readline()
        assert "listening on " in line, line
        self.address = line.split("listening on ", 1)[1].split()[0]

    def stop(self):
        self.proc.terminate()
        code = self.proc.wait(timeout=60)
        self.proc.stdout.close()
        self.log.close()
        return code


class Device:
    def __init__(self, type, index=0):
        self.type, self.index = type, index

    def __eq__(self, other):
        return (self.type, self.index) == (other.type, other.index)

    def __str__(self):
        return f"{self.type}:{self.index}"


class Dtype:
    def __init__(self, name):
        self.name = name

    def __str__(self):
        return "torch." + self.name


class StandIn:
    """A tensor's attributes at a made-up address (never dereferenced)."""
    next_address = 1 << 32

    def __init__(self, shape, dtype="bfloat16", device="cuda", strides=None):
        self.shape, self.dtype, self.device = tuple(shape), Dtype(dtype), Device(device)
        if strides is None:
            strides, step = [], 1
            for s in reversed(shape):
                strides.insert(0, step)
                step *= s
        self._strides, self.address = tuple(strides), StandIn.next_address
        StandIn.next_address += 1 << 24

    def stride(self):
        return self._strides

    def data_ptr(self):
        return self.address


def qkv_args(T=64, H=2):
    return dict(mixed_qkv=StandIn((T, 3 * H * 128)), q_weight=StandIn((128,)), k_weight=StandIn((128,)),
                cos=StandIn((512, 64), "float32"), sin=StandIn((512, 64), "float32"),
                out=[StandIn((T, H, 128)) for _ in range(3)] + [StandIn((T, H), "float32") for _ in range(2)])


def qkv_backward_inputs(T, H):
    """The forward's arguments, the whole-QKV backward's inputs after the gradients (mixed_qkv,
    the weights, Q's tables, no K tables) and the saved rstd of Q and K."""
    qkv = qkv_args(T, H)
    tables = [qkv[n] for n in ("mixed_qkv", "q_weight", "k_weight", "cos", "sin")] + [None, None]
    return qkv, tables, [StandIn((T, H), "float32") for _ in range(2)]


def ln_args(T=64, S=32):
    return dict(x=StandIn((T, 3072)), scale=StandIn((T // S, 3072)), shift=StandIn((T // S, 3072)),
                tokens_per_sample=S, out=[StandIn((T, 3072)), StandIn((T,), "float32"), StandIn((T,), "float32")])


class Package(unittest.TestCase):
    """One server precompiles the families into a database file; the tests use both."""

    @classmethod
    def setUpClass(cls):
        # Outputs the builders allocate are stand-ins too (torch would allocate them on the GPU).
        mxfp6._calls._empty = lambda shape, dtype, device, strides=None: StandIn(shape, dtype, strides=strides)
        cls.dir = tempfile.mkdtemp(prefix="mxfp6-python-test-")
        cls.db = os.path.join(cls.dir, "kernels.db")
        cls.server = Server(cls.db, os.path.join(cls.dir, "server.log"))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", mxfp6.ShapeWarning)
            conn = mxfp6.connect(f"grpc://{cls.server.address}", cache_dir=os.path.join(cls.dir, "cache"),
                                 deadline_ms=300000)
            cls.served = conn.prefetch(SHAPES)
            cls.more = conn.prefetch(MORE_SHAPES)
        cls.served_description = conn.describe()
        conn.close()

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()
        shutil.rmtree(cls.dir)

    def embedded(self):
        return mxfp6.connect(f"sqlite://{self.db}")

    def test_resolves_through_a_server(self):
        self.assertIn(self.server.address, self.served_description)
        self.assertEqual(self.served.source, "server")
        self.assertEqual(sorted(self.served.keys), sorted([QKV_FWD, LN_FWD]))
        self.assertEqual(self.served.counts["default"], 2)
        self.assertEqual(self.served.failed, {})

    def test_prefetch_from_a_database_warns_once_per_key(self):
        conn = self.embedded()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            report = mxfp6.prefetch(SHAPES)
            again = mxfp6.prefetch([QKV_FWD, LN_FWD])
        self.assertEqual(report.source, "embedded")
        self.assertEqual(report.counts, {"exact": 0, "nearest": 0, "default": 2, "pinned": 0})
        self.assertEqual(again.counts["default"], 2)
        shape_warnings = [str(w.message) for w in caught if issubclass(w.category, mxfp6.ShapeWarning)]
        self.assertEqual(len(shape_warnings), 2, shape_warnings)
        self.assertTrue(any(QKV_FWD in w for w in shape_warnings))
        stats = mxfp6.stats()
        self.assertEqual(stats["rules"]["default"], 2)
        self.assertEqual(stats["warned"], sorted([QKV_FWD, LN_FWD]))
        self.assertIn("embedded", stats["source"])
        conn.close()

    def test_a_key_nothing_was_precompiled_for_is_reported(self):
        self.embedded()
        report = mxfp6.prefetch(["ln_modulate_fwd/S=32,layout=sbd/sm_90/D=3072/64"])
        self.assertEqual(len(report.failed), 1)
        self.assertIn("failed", repr(report))

    def test_nothing_to_answer_is_an_error_at_connect(self):
        with self.assertRaisesRegex(mxfp6.ConnectError, "/no/such/dir/kernels.db"):
            mxfp6.connect("sqlite:///no/such/dir/kernels.db")
        with self.assertRaisesRegex(mxfp6.ConnectError, "neither grpc://"):
            mxfp6.connect("http://localhost:1")

    def test_a_bad_shape_set_names_the_entry(self):
        self.embedded()
        with self.assertRaisesRegex(ValueError, "nope"):
            mxfp6.prefetch('{"entries": [{"op": "nope"}]}')

    def test_a_correct_call_passes_every_check(self):
        conn = self.embedded()
        warnings.simplefilter("ignore", mxfp6.ShapeWarning)
        args = qkv_args()
        call, _ = mxfp6._calls.qkv_fwd(**args)
        self.assertIn("norm_rope_qkv_fwd[", call.check(conn).plan())
        call, _ = mxfp6._calls.ln_fwd(**ln_args())
        call.check(conn)

    def test_a_recipe_takes_each_address_from_the_argument_at_its_position(self):
        import torch
        launch = mxfp6._launch
        a, b = torch.zeros(4, 8, dtype=torch.bfloat16), torch.zeros(8)
        sig = launch.signature((a, b, a.clone(), "megatron", 1, 1e-6))
        self.assertEqual(sig, launch.signature((a.clone(), b.clone(), a.clone(), "megatron", 1, 1e-6)))
        for other in [(a, b, a, "megatron", 1, 1e-6),            # one tensor at two positions
                      (a.t(), b, a.clone(), "megatron", 1, 1e-6),  # strides
                      (a.float(), b, a.clone(), "megatron", 1, 1e-6),
                      (a, b, a.clone(), "blocked", 1, 1e-6), (a, b, a.clone(), "megatron", 1.0, 1e-6),
                      (a, b, a.clone(), "megatron", 1, 1e-5)]:
            self.assertNotEqual(launch.signature(other), sig)
        self.assertIsNone(launch.signature((a, object())))

        # K's tables: Q's when k_cos/k_sin are None, their own otherwise; q, k, v and the rstd from
        # the outputs. A second call's addresses go where the first call's arguments went.
        def call_of(k_tables):
            qkv = qkv_args()
            args = (qkv["mixed_qkv"], qkv["q_weight"], qkv["k_weight"], qkv["cos"], qkv["sin"]) + k_tables
            call, out = mxfp6._calls.qkv_fwd(*args, out=qkv["out"])
            return call, args + ("megatron", 1, 1e-6), out

        for k_tables in [(None, None), (StandIn((512, 64), "float32"), StandIn((512, 64), "float32"))]:
            call, args, out = call_of(k_tables)
            ts, ss = call.arrays()
            recipe = launch.Recipe(call, None, ts, ss, args, out)
            _, args2, out2 = call_of(tuple(StandIn(t.shape, "float32") if t else None for t in k_tables))
            recipe.write_addresses(args2, out2)
            own = k_tables[0] is not None
            expected = {"qkv": args2[0], "q_weight": args2[1], "k_weight": args2[2], "q_cos": args2[3],
                        "q_sin": args2[4], "k_cos": args2[5] if own else args2[3],
                        "k_sin": args2[6] if own else args2[4], "q": out2[0], "k": out2[1], "v": out2[2],
                        "q_rstd": out2[3], "k_rstd": out2[4]}
            self.assertEqual({nt.name.decode(): nt.tensor.data for nt in ts},
                             {n: t.data_ptr() for n, t in expected.items()})

    def test_every_op_call_passes_its_checks(self):
        self.assertEqual(self.more.failed, {})
        conn = self.embedded()
        warnings.simplefilter("ignore", mxfp6.ShapeWarning)
        c = mxfp6._calls
        T, H = 64, 2
        qkv, tables, rstd = qkv_backward_inputs(T, H)
        grads = [StandIn((T, H, 128)) for _ in range(3)]
        blobs = [StandIn(s, "uint8") for _, s in c.packed_shapes(T, 3 * H * 128, "dual")]
        x = StandIn((T, 3072))
        per_sample, per_token = StandIn((T // 32, 3072)), StandIn((T, 3072))
        stats = [StandIn((T,), "float32") for _ in range(2)]
        heads = StandIn((T, H, 128), strides=(3 * H * 128, 3 * 128, 1))  # K of a Megatron mixed_qkv
        calls = {
            "norm_rope_qkv_bwd[": c.qkv_bwd(*grads, *tables, *rstd, "megatron", 1),
            "norm_rope_qkv_bwd_pack_bf16[": c.qkv_bwd_pack(*grads, *tables, *rstd, "megatron", 1, "E3M2", "RCEIL",
                                                           True, blobs),
            "norm_rope_fwd[": c.heads_fwd(heads, StandIn((128,)), qkv["cos"], qkv["sin"], 1, 1e-6),
            "norm_rope_bwd[": c.heads_bwd(StandIn((T, H, 128)), heads, StandIn((128,)), qkv["cos"], qkv["sin"],
                                          rstd[0], 1),
            "ln_modulate_bwd[": c.ln_bwd(x, x, per_sample, *stats, 32, "bsd"),
            "ln_modulate_fwd_per_token[": c.ln_fwd(x, per_token, per_token, None, "bsd", 1e-6),
            "ln_modulate_bwd_per_token[": c.ln_bwd(x, x, per_token, *stats, None, "bsd"),
            "mxfp6_pack_rows[": c.pack(x, "E3M2", "RCEIL", "rows"),
            "mxfp6_pack_cols[": c.pack(x, "E3M2", "RCEIL", "cols"),
            "mxfp6_pack_dual[": c.pack(x, "E3M2", "RCEIL", "dual"),
        }
        for kernel, (call, out) in calls.items():
            with self.subTest(kernel):
                self.assertIn(kernel, call.check(conn).plan())
        # the outputs allocated for the backward ops have the shapes autograd needs
        self.assertEqual(calls["ln_modulate_bwd["][1][1].shape, (T // 32, 3072))

    def test_the_gradient_of_a_strided_mixed_qkv_takes_its_row_stride(self):
        # Flux's single block slices mixed_qkv from a wider projection; the kernels read it and
        # write its gradient with one token stride.
        self.assertEqual(self.more.failed, {})
        conn = self.embedded()
        warnings.simplefilter("ignore", mxfp6.ShapeWarning)
        c = mxfp6._calls
        T, H = 64, 2
        C = 3 * H * 128
        _, tables, rstd = qkv_backward_inputs(T, H)
        wide = StandIn((T, C), strides=(C + 3072, 1))
        grads = [StandIn((T, H, 128)) for _ in range(3)]
        call, out = c.qkv_bwd(*grads, wide, *tables[1:], *rstd, "megatron", 1)
        self.assertEqual((out[0].shape, out[0].stride()), ((T, C), (C + 3072, 1)))
        call.check(conn)
        blobs = [StandIn(s, "uint8") for _, s in c.packed_shapes(T, C, "dual")]
        call, out = c.qkv_bwd_pack(*grads, wide, *tables[1:], *rstd, "megatron", 1, "E3M2", "RCEIL", True, blobs)
        self.assertEqual(out[1].stride(), (C + 3072, 1))
        call.check(conn)
        # A gradient of another row stride, given: refused, naming it.
        call, _ = c.qkv_bwd(*grads, wide, *tables[1:], *rstd, "megatron", 1,
                            out=[StandIn((T, C)), StandIn((2, 128), "float32")])
        with self.assertRaisesRegex(ValueError, r"'d\(mixed_qkv\)'.*stride"):
            call.check(conn)

    def test_bad_arguments_of_backward_ops_and_packers_are_named(self):
        conn = self.embedded()
        warnings.simplefilter("ignore", mxfp6.ShapeWarning)
        c = mxfp6._calls
        T, H = 64, 2
        qkv, tables, rstd = qkv_backward_inputs(T, H)
        x = StandIn((T, 3072))
        stats = [StandIn((T,), "float32") for _ in range(2)]
        cases = [
            ("a gradient of the wrong shape",
             lambda: c.qkv_bwd(StandIn((T, H, 128)), StandIn((T, H + 1, 128)), StandIn((T, H, 128)), *tables, *rstd,
                               "megatron", 1), "'dk'"),
            ("a gradient on the CPU",
             lambda: c.qkv_bwd(StandIn((T, H, 128), device="cpu"), StandIn((T, H, 128)), StandIn((T, H, 128)),
                               *tables, *rstd, "megatron", 1), "'dq' must be on a CUDA device"),
            ("an rstd of the wrong dtype",
             lambda: c.qkv_bwd(*[StandIn((T, H, 128)) for _ in range(3)], *tables, StandIn((T, H)), rstd[1],
                               "megatron", 1), "'q_rstd'"),
            ("a per-sample scale of the wrong rows", lambda: c.ln_bwd(x, x, StandIn((3, 3072)), *stats, 32, "bsd"),
             "'scale'"),
            ("a per-token scale of the wrong rows", lambda: c.ln_fwd(x, StandIn((T - 1, 3072)), StandIn((T, 3072)), None),
             "'scale'"),
            ("a packer format", lambda: c.pack(x, "E4M3", "RCEIL", "rows"), "'fmt'"),
            ("a packer mode", lambda: c.pack(x, "E3M2", "NEAREST", "rows"), "'mode'"),
            ("packing columns of too few rows", lambda: c.pack(StandIn((48, 3072)), "E3M2", "RCEIL", "cols"),
             "multiple of 32"),
            ("a packer width", lambda: c.pack(StandIn((T, 100)), "E3M2", "RCEIL", "rows"), "'x' must be [T, C]"),
            ("a packer's output", lambda: c.pack(x, "E3M2", "RCEIL", "rows",
                                                 out=[StandIn((T, 2304), "uint8"), StandIn((T, 97), "uint8")]),
             "'scales'"),
            ("a per-tensor x that is not [T, H, 128]",
             lambda: c.heads_fwd(StandIn((T, H, 64)), StandIn((128,)), qkv["cos"], qkv["sin"], 1, 1e-6),
             "'x' must be [T, H, 128]"),
        ]
        for what, build, message in cases:
            with self.subTest(what):
                with self.assertRaises(ValueError) as e:
                    call, _ = build()
                    call.check(conn)
                self.assertIn(message, str(e.exception))
        with self.assertRaisesRegex(ValueError, "'fmt'"):
            mxfp6.PackedGrad(fmt="E5M2")

    def test_bad_arguments_are_named_before_anything_launches(self):
        conn = self.embedded()
        cases = [
            ("cpu", lambda a: a.update(q_weight=StandIn((128,), device="cpu")), "'q_weight' must be on a CUDA device"),
            ("not a tensor", lambda a: a.update(cos=3.0), "'cos' must be a tensor"),
            ("dtype", lambda a: a.update(k_weight=StandIn((128,), "float32")), "'k_weight'"),
            ("dtype of a table", lambda a: a.update(sin=StandIn((512, 64))), "'sin'"),
            ("columns", lambda a: a.update(mixed_qkv=StandIn((64, 700))), "'mixed_qkv' must be [T, 3*H*128]"),
            ("shape", lambda a: a["out"].__setitem__(1, StandIn((63, 2, 128))), "'k'"),
            ("strides", lambda a: a["out"].__setitem__(2, StandIn((64, 2, 128), strides=(512, 256, 1))), "'v'"),
            ("alignment", lambda a: setattr(a["q_weight"], "address", a["q_weight"].address + 2), "'q_weight'"),
            ("layout", lambda a: a.update(layout="bshd"), "'layout'"),
        ]
        for what, spoil, message in cases:
            with self.subTest(what):
                args = qkv_args()
                spoil(args)
                with self.assertRaises(ValueError) as e:
                    call, _ = mxfp6._calls.qkv_fwd(**args)
                    call.check(conn)
                self.assertIn(message, str(e.exception))
                self.assertIn("mxfp6.norm_rope", str(e.exception))
        args = ln_args()
        args["shift"] = StandIn((2, 3072), "float32")
        with self.assertRaisesRegex(ValueError, "'shift'"):
            mxfp6._calls.ln_fwd(**args)[0].check(conn)
        args = ln_args()
        args["tokens_per_sample"] = 48
        with self.assertRaisesRegex(ValueError, "'tokens_per_sample'"):
            mxfp6._calls.ln_fwd(**args)[0].check(conn)

    @unittest.skipUnless(TORCH, "torch is not installed: the ops on real torch tensors are not exercised here")
    def test_cpu_tensors_are_refused(self):
        import torch
        self.embedded()
        x = torch.zeros(64, 3072, dtype=torch.bfloat16)
        s = torch.zeros(2, 3072, dtype=torch.bfloat16)
        with self.assertRaisesRegex(ValueError, "'x' must be on a CUDA device"):
            mxfp6.ln_modulate(x, s, s, tokens_per_sample=32)

    @unittest.skipUnless(TORCH, "torch is not installed: the ops on real torch tensors are not exercised here")
    def test_a_rotary_table_requiring_grad_is_refused_by_name(self):
        import torch
        self.embedded()
        m = torch.zeros(64, 768, dtype=torch.bfloat16, requires_grad=True)
        w = torch.ones(128, dtype=torch.bfloat16)
        table = torch.ones(64, 64)
        with self.assertRaisesRegex(ValueError, "'k_sin' \\(a rotary table\\) requires grad"):
            mxfp6.norm_rope(m, w, w, table, table, table, table.clone().requires_grad_())
        with self.assertRaisesRegex(ValueError, "'cos' \\(a rotary table\\) requires grad"):
            mxfp6.norm_rope_heads(torch.zeros(64, 2, 128, dtype=torch.bfloat16, requires_grad=True), w,
                                  table.clone().requires_grad_(), table)

    def test_custom_ops_registered_with_torch_2_4(self):
        if not TORCH:
            self.skipTest("torch is not installed: nothing to register the custom ops with")
        import torch
        if not hasattr(torch.library, "custom_op"):
            self.skipTest(f"torch {torch.__version__} has no torch.library.custom_op (2.4+): the ops launch eagerly")
        self.assertTrue(mxfp6._autograd.CUSTOM_OPS)
        for op in ("norm_rope_qkv", "norm_rope_qkv_backward", "norm_rope_heads", "ln_modulate", "pack"):
            self.assertTrue(hasattr(torch.ops.mxfp6, op), op)


class Install(unittest.TestCase):
    def test_a_failed_load_lists_every_place_tried(self):
        search = mxfp6._lib.search_dirs
        mxfp6._lib.search_dirs = lambda: [("/no/such/dir", "MXFP6_LIB_DIR"), ("/no/other", "next to the package")]
        try:
            with self.assertRaises(mxfp6._lib.LibraryNotFound) as e:
                mxfp6._lib._load()
        finally:
            mxfp6._lib.search_dirs = search
        self.assertIn("tried /no/such/dir (MXFP6_LIB_DIR): no libmxfp6rt.so", str(e.exception))
        self.assertIn("/no/other (next to the package)", str(e.exception))

    def test_imports_and_connects_without_torch(self):
        # torch made unimportable (a None entry in sys.modules): connect and prefetch need none.
        code = ("import sys; sys.modules['torch'] = None; import mxfp6; "
                "mxfp6.connect('sqlite:///no/such/kernels.db')")
        out = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python")),
                             capture_output=True, text=True)
        self.assertIn("ConnectError", out.stderr)  # got as far as connecting
        self.assertNotIn("ModuleNotFoundError", out.stderr)
        self.assertNotIn("ImportError", out.stderr)

    def test_installs_offline_and_finds_the_build_tree(self):
        target = tempfile.mkdtemp(prefix="mxfp6-install-")
        try:
            # --no-index: no package index at all; the in-tree build backend needs nothing.
            subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "--no-cache-dir",
                            "--target", target, os.path.join(ROOT, "python")], check=True, capture_output=True)
            env = dict(os.environ)
            env.pop("MXFP6_LIB_DIR")
            env.pop("PYTHONPATH", None)
            out = subprocess.run([sys.executable, "-c", "import mxfp6, mxfp6._lib as l; print(l.found_in)"],
                                 cwd=target, env=env, check=True, capture_output=True, text=True).stdout
            self.assertEqual(os.path.realpath(out.strip()), os.path.realpath(os.path.join(ROOT, "build", "lib")))
            # A MXFP6_LIB_DIR without the libraries falls through to the next place.
            env["MXFP6_LIB_DIR"] = "/no/such/dir"
            out = subprocess.run([sys.executable, "-c", "import mxfp6, mxfp6._lib as l; print(l.found_in)"],
                                 cwd=target, env=env, check=True, capture_output=True, text=True).stdout
            self.assertEqual(os.path.realpath(out.strip()), os.path.realpath(os.path.join(ROOT, "build", "lib")))
        finally:
            shutil.rmtree(target)


if __name__ == "__main__":
    unittest.main()
