"""`pip install --no-build-isolation .` from a checkout: builds the Python module (CMake target
pert_python, the same build as tools/setup.sh's) for the interpreter running pip and installs the
package `pert` into its environment, a venv included (docs/python.md).

Offline: setuptools, pybind11 and numpy are Debian's (python3-setuptools, pybind11-dev,
python3-numpy; a venv made with --system-site-packages sees them). Everything the build writes
goes under build-pip/ (ignored by git), or $PERT_PIP_BUILD; PERT_CMAKE_BUILD_DIR=DIR builds the
module in an existing pert build instead, as it is configured (the test python_install does, to
reuse its objects).
"""
import os
import re
import shutil
import subprocess
import sys
import sysconfig

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))
BUILD = os.path.abspath(os.environ.get("PERT_PIP_BUILD") or os.path.join(ROOT, "build-pip"))
os.makedirs(BUILD, exist_ok=True)  # (egg_info writes there; it must exist)


def version():
    with open(os.path.join(ROOT, "CMakeLists.txt"), encoding="utf-8") as f:
        return re.search(r"project\(pert VERSION ([0-9.]+)", f.read()).group(1)


class CMakeBuild(build_ext):
    """pert._pert from CMake's pert_python target, copied where setuptools puts the extension."""

    def build_extension(self, ext):
        given = os.environ.get("PERT_CMAKE_BUILD_DIR")
        cmake_dir = os.path.abspath(given or os.path.join(BUILD, "cmake"))
        if given and not os.path.isfile(os.path.join(cmake_dir, "CMakeCache.txt")):
            sys.exit(f"PERT_CMAKE_BUILD_DIR={given}: not a configured CMake build (no CMakeCache.txt)")
        if not given:  # configured here for this interpreter; the test suite is not needed
            self.run_cmake(["cmake", "-S", ROOT, "-B", cmake_dir, "-DCMAKE_BUILD_TYPE=Release",
                            f"-DPERT_PYTHON={sys.executable}", "-DPERT_BUILD_TESTS=OFF"])
        self.run_cmake(["cmake", "--build", cmake_dir, "--target", "pert_python", "-j", str(os.cpu_count() or 1)])
        built = os.path.join(cmake_dir, "python", "pert", "_pert" + sysconfig.get_config_var("EXT_SUFFIX"))
        if not os.path.isfile(built):  # a build configured for another Python names it otherwise
            sys.exit(f"{built}: not built; {cmake_dir} builds the module for another Python than "
                     f"{sys.executable} ({sys.version.split()[0]})")
        target = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copyfile(built, target)

    @staticmethod
    def run_cmake(command):
        if shutil.which("cmake") is None:
            sys.exit("setup.py: cmake not found (Debian: apt-get install cmake; tools/setup.sh installs what pert needs)")
        subprocess.run(command, check=True)


setup(
    name="pert",
    version=version(),
    description="Positional-encoding runtime for small llama-style decoders (the pert CLI's library, from Python)",
    packages=["pert"],
    package_dir={"pert": "src/python/pert"},
    ext_modules=[Extension("pert._pert", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
    install_requires=[],  # numpy: Debian's, checked at import (pert/__init__.py), never downloaded
    python_requires=">=3.8",
    zip_safe=False,
    options={"build": {"build_base": BUILD}, "egg_info": {"egg_base": BUILD}},
)
