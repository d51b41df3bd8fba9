"""setup.py — only the part pyproject.toml cannot say: put libfco.so into the package.

build_py copies libfco.so into fco/: $FCO_LIB if set, else the repository's build/lib/libfco.so,
built first with `make lib` at the repository root when it is missing (FCO_NO_MAKE=1 skips
that; the package then looks for the library at run time, see fco/_lib.py). The wheel is
platform-specific because of the .so.
"""
import os
import shutil
import subprocess

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def find_or_build_lib():
    env = os.environ.get("FCO_LIB")
    if env:
        if not os.path.isfile(env):
            raise SystemExit(f"FCO_LIB={env}: no such file")
        return env
    lib = os.path.join(ROOT, "build", "lib", "libfco.so")
    if not os.path.isfile(lib) and os.path.isfile(os.path.join(ROOT, "Makefile")) \
            and os.environ.get("FCO_NO_MAKE") != "1":
        subprocess.check_call(["make", "-C", ROOT, "lib", f"-j{os.cpu_count() or 2}"])
    return lib if os.path.isfile(lib) else None


class BuildPyWithLib(build_py):
    def run(self):
        super().run()
        lib = find_or_build_lib()
        if lib:
            dst = os.path.join(self.build_lib, "fco", "libfco.so")
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            shutil.copy2(lib, dst)
        else:
            print("fco: libfco.so not built and not shipped; set FCO_LIB at run time")


class BinaryDistribution(Distribution):
    def has_ext_modules(self):
        return True


setup(cmdclass={"build_py": BuildPyWithLib}, distclass=BinaryDistribution)
