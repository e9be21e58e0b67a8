"""Build vad._vad against an installed libvad.

Where libvad is: $VAD_INCLUDE_DIR / $VAD_LIBRARY_DIR if set (the Debian build points them
at the tree it built), else `pkg-config --cflags --libs libvad`, else /usr/local.
"""

import os
import shlex
import subprocess

from setuptools import Extension, setup


def libvad_flags():
    inc = os.environ.get("VAD_INCLUDE_DIR")
    lib = os.environ.get("VAD_LIBRARY_DIR")
    if inc or lib:
        return {
            "include_dirs": [inc] if inc else [],
            "library_dirs": [lib] if lib else [],
            "libraries": ["vad"],
        }
    try:
        out = subprocess.run(
            ["pkg-config", "--cflags", "--libs", "libvad"],
            check=True, capture_output=True, text=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return {
            "include_dirs": ["/usr/local/include"],
            "library_dirs": ["/usr/local/lib"],
            "libraries": ["vad"],
        }
    flags = {"include_dirs": [], "library_dirs": [], "libraries": [], "extra_compile_args": []}
    for word in shlex.split(out):
        if word.startswith("-I"):
            flags["include_dirs"].append(word[2:])
        elif word.startswith("-L"):
            flags["library_dirs"].append(word[2:])
        elif word.startswith("-l"):
            flags["libraries"].append(word[2:])
        else:
            flags["extra_compile_args"].append(word)
    return flags


here = os.path.dirname(os.path.abspath(__file__))
sources = sorted(
    os.path.join("src", f) for f in os.listdir(os.path.join(here, "src")) if f.endswith(".c")
)
flags = libvad_flags()
flags.setdefault("extra_compile_args", []).extend(["-std=gnu11", "-D_GNU_SOURCE", "-fvisibility=hidden"])

setup(
    ext_modules=[Extension("vad._vad", sources=sources, depends=["src/vadpy.h"], **flags)],
)
