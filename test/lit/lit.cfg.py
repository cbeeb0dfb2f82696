# lit configuration for Kiln's kiln-opt + FileCheck tests.
import os

import lit.formats
from lit.llvm import llvm_config

config.name = "Kiln"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".ll"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.kiln_obj_root, "test", "lit")
config.excludes = ["CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py"]

llvm_config.use_default_substitutions()
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
llvm_config.add_tool_substitutions(
    ["kiln-opt"], [config.kiln_tools_dir, config.llvm_tools_dir]
)
# LLVM's opt with Kiln's LLVM IR passes loaded (the .ll tests).
llvm_config.add_tool_substitutions(["opt"], [config.llvm_tools_dir])
config.substitutions.append(("%kiln_llvm_passes", config.kiln_llvm_passes))
