"""The compiled part of statectl: ``formats.flink.read.cdecoder`` (see its ``speedups.py``):
``cdecoder.c`` (the module; Flink's keyed key groups) and ``cdecoder_rocksdb.c`` (RocksDB's
SST data blocks, indexes and merging), sharing ``cdecoder.h``.

Everything else is in ``pyproject.toml``. The extension is optional: where it does not build
(no C compiler, no Python headers) the install goes on without it and statectl decodes in
pure Python (the same entries; ``statectl --version`` says which).
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("formats.flink.read.cdecoder",
                             sources=["formats/flink/read/cdecoder.c",
                                      "formats/flink/read/cdecoder_rocksdb.c"],
                             depends=["formats/flink/read/cdecoder.h"],
                             extra_compile_args=["-O2", "-std=c99"],
                             optional=True)])
