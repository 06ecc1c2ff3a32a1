"""Build hook: compiles the Kineto reader's compiled decoder (tracedoc/ingest/kineto/_kscan.c) with the
system's C compiler. Where that fails (no compiler, no Python headers) it says so and builds without it:
tracedoc then reads traces with its pure-Python decoder, which gives the same tables (README: Environment,
``TRACEDOC_DECODER``).

An editable install (``pip install -e .``) gets the module built in place beside its source (git ignores
it); a wheel gets it built in a scratch folder and shipped inside, which makes the wheel platform-specific.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tempfile

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

SOURCE = os.path.join("tracedoc", "ingest", "kineto", "_kscan.c")


def compile_extension(root: str, out_dir: str) -> str:
    """Compile the module into ``out_dir``; its path. Raises ``RuntimeError`` with the reason."""
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    out = os.path.join(out_dir, "_kscan" + suffix)
    cc = shlex.split(os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc")
    flags = shlex.split(sysconfig.get_config_var("CCSHARED") or "-fPIC")
    ldshared = ["-shared"] if sys.platform != "darwin" else ["-bundle", "-undefined", "dynamic_lookup"]
    cmd = [*cc, "-O2", *flags, *ldshared, "-I", sysconfig.get_paths()["include"], os.path.join(root, SOURCE),
           "-o", out]
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    except (OSError, subprocess.SubprocessError) as exc:
        raise RuntimeError(f"{shlex.join(cmd)}: {exc}") from None
    if res.returncode != 0 or not os.path.exists(out):
        raise RuntimeError(f"{shlex.join(cmd)} failed ({res.returncode}): {res.stderr.strip()[-600:]}")
    return out


class CustomBuildHook(BuildHookInterface):
    def initialize(self, version: str, build_data: dict) -> None:
        if self.target_name != "wheel":
            return
        editable = version == "editable"
        self._scratch = None if editable else tempfile.mkdtemp(prefix="tracedoc-build-")
        out_dir = os.path.join(self.root, os.path.dirname(SOURCE)) if editable else self._scratch
        try:
            built = compile_extension(self.root, out_dir)
        except RuntimeError as exc:
            print(f"tracedoc: the compiled Kineto decoder was not built ({exc}); tracedoc will use its "
                  "pure-Python decoder, which reads traces the same, more slowly", file=sys.stderr)
            return
        if not editable:
            build_data["force_include"][built] = os.path.join(os.path.dirname(SOURCE), os.path.basename(built))
            build_data["pure_python"] = False
            build_data["infer_tag"] = True

    def finalize(self, version: str, build_data: dict, artifact_path: str) -> None:
        if getattr(self, "_scratch", None):
            shutil.rmtree(self._scratch, ignore_errors=True)
