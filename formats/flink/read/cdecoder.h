/*
 * The parts of formats.flink.read.cdecoder (cdecoder.c: the module, Flink's keyed key groups;
 * cdecoder_rocksdb.c: RocksDB's SST data blocks, indexes and merging) share these.
 */
#ifndef STATECTL_CDECODER_H
#define STATECTL_CDECODER_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* GIVE_UP: not taken here (the Python readers decode it); ERROR: a Python error is set
 * (memory) */
#define TAKEN 0
#define GIVE_UP 1
#define ERROR (-1)

/* cdecoder_rocksdb.c: the functions of the module that read RocksDB's tables */
PyObject *rocksdb_simple_entries(PyObject *self, PyObject *args);
PyObject *rocksdb_data_run(PyObject *self, PyObject *args);
PyObject *rocksdb_index_run(PyObject *self, PyObject *args);
PyObject *rocksdb_key_order(PyObject *self, PyObject *keys);
PyObject *rocksdb_trailer_span(PyObject *self, PyObject *trailers);
PyObject *rocksdb_onto_oldest(PyObject *self, PyObject *args);

#endif
