"""The compiled part of statectl: ``formats.flink.read.cdecoder`` (see its ``speedups.py``).

Everything else is in ``pyproject.toml``. The extension is optional: where it does not build
(no C compiler, no Python headers) the install goes on without it and statectl decodes in
pure Python (the same entries; ``statectl --version`` says which).
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("formats.flink.read.cdecoder",
                             sources=["formats/flink/read/cdecoder.c"],
                             extra_compile_args=["-O2", "-std=c99"],
                             optional=True)])
