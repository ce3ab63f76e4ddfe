# lit configuration: every .test file here runs its RUN lines through the shell, with
# %mxfp6c, %kernels (the kernels_dsl folder) and LLVM's FileCheck/not on PATH.
import os
import lit.formats

config.name = "mxfp6c"
config.test_format = lit.formats.ShTest(True)
config.suffixes = [".test"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.mxfp6_bin_dir, "..", "tests", "lit")
config.substitutions.append(("%mxfp6c", os.path.join(config.mxfp6_bin_dir, "mxfp6c")))
config.substitutions.append(("%kernels", os.path.join(config.mxfp6_src_root, "kernels_dsl")))
config.environment["PATH"] = os.pathsep.join([config.llvm_tools_dir, config.environment.get("PATH", "")])
