/*
 * formats.flink.read.cdecoder, RocksDB's part: the data blocks, indexes and merging of the SST
 * files of Flink's RocksDB snapshots, read in C (issue 45), for formats/flink/read/rocksdb/
 * (block.py, sst.py, merge.py).
 *
 * As in cdecoder.c, nothing here reports a problem: anything it would not read exactly as the
 * Python readers do (a checksum that does not match, a compression other than none or Snappy,
 * a block with a hash index, anything not well formed) is given back (None) and the Python
 * readers read it and say what is wrong (tests/test_rocksdb_compiled.py compares both on tables
 * RocksDB wrote, whole and damaged).
 */
#include "cdecoder.h"

/* ------------------------------------------------------------------------------------------
 * RocksDB data blocks (rocksdb/block.py decode_data_blocks)
 */

/* simple_entries(buf, pos, limit, keys, values, heads) -> pos | None
 *
 * The loop of decode_data_blocks over one block of ``buf`` (``pos`` to ``limit``), as its
 * Python loop does it, checking nothing but the end: each entry's header is three one-byte
 * varints (shared, non-shared, value length); the user key is the previous one's first
 * ``shared`` bytes and the key delta without its 8-byte trailer; slices are Python's
 * (clamped). Appends to the three lists and returns where the loop ended (the caller checks
 * that and the rest, vectorised). None where a header would pass the buffer's end (the
 * Python loop raises there).
 */
PyObject *rocksdb_simple_entries(PyObject *self, PyObject *args) {
    Py_buffer buf;
    Py_ssize_t pos, limit;
    PyObject *keys, *values, *heads;
    if (!PyArg_ParseTuple(args, "y*nnO!O!O!", &buf, &pos, &limit, &PyList_Type, &keys,
                          &PyList_Type, &values, &PyList_Type, &heads))
        return NULL;
    const unsigned char *data = buf.buf;
    Py_ssize_t size = buf.len;
    unsigned char key[1024];  /* shared <= 255 and a delta slice <= 255 bytes */
    Py_ssize_t key_len = 0;
    int error = 0, give_up = 0;
    while (pos < limit) {
        if (pos < 0 || pos + 3 > size) { give_up = 1; break; }
        Py_ssize_t shared = data[pos], non_shared = data[pos + 1], value_length = data[pos + 2];
        Py_ssize_t end = pos + 3 + non_shared;
        if (shared < key_len) key_len = shared;  /* key[:shared] */
        Py_ssize_t from = pos + 3, to = end - 8;  /* buf[pos + 3:end - 8], clamped */
        if (to > size) to = size;
        if (to > from) {
            memcpy(key + key_len, data + from, (size_t)(to - from));
            key_len += to - from;
        }
        PyObject *head = PyLong_FromSsize_t(pos);
        pos = end + value_length;
        Py_ssize_t v_from = end < size ? end : size, v_to = pos < size ? pos : size;
        PyObject *k = PyBytes_FromStringAndSize((const char *)key, key_len);
        PyObject *v = PyBytes_FromStringAndSize((const char *)data + v_from,
                                                v_to > v_from ? v_to - v_from : 0);
        if (head == NULL || k == NULL || v == NULL || PyList_Append(heads, head)
                || PyList_Append(keys, k) || PyList_Append(values, v))
            error = 1;
        Py_XDECREF(head);
        Py_XDECREF(k);
        Py_XDECREF(v);
        if (error) break;
    }
    PyBuffer_Release(&buf);
    if (error) return NULL;
    if (give_up) Py_RETURN_NONE;
    return PyLong_FromSsize_t(pos);
}

/* ------------------------------------------------------------------------------------------
 * RocksDB data blocks read whole: checksum, Snappy, entries (rocksdb/sst.py typed_data_blocks)
 */

#define MAX_BLOCK_SIZE (64 << 20)  /* compression.py MAX_BLOCK_SIZE */
#define XXH3_LAST_BYTE_PRIME 0x6B9083D9u
#define CRC32C_MASK_DELTA 0xA282EAD8u

static inline uint32_t le32(const unsigned char *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

static inline uint64_t le64(const unsigned char *p) {
    return (uint64_t)le32(p) | ((uint64_t)le32(p + 4) << 32);
}

/* bytes a vs b as Python compares them: <0, 0, >0 */
static inline int bytes_cmp(PyObject *a, PyObject *b) {
    Py_ssize_t la = PyBytes_GET_SIZE(a), lb = PyBytes_GET_SIZE(b);
    int c = memcmp(PyBytes_AS_STRING(a), PyBytes_AS_STRING(b), (size_t)(la < lb ? la : lb));
    return c ? c : (la < lb ? -1 : la > lb);
}

static int all_bytes(PyObject *list) {
    Py_ssize_t n = PyList_GET_SIZE(list);
    for (Py_ssize_t i = 0; i < n; i++)
        if (!PyBytes_CheckExact(PyList_GET_ITEM(list, i))) return 0;
    return 1;
}

/* A varint of at most max_shift / 7 + 1 bytes at b[*pos:limit] (coding.py get_varint32 /
 * get_varint64); GIVE_UP where those raise. */
static inline int varint(const unsigned char *b, Py_ssize_t *pos, Py_ssize_t limit, int max_shift,
                         uint64_t bound, uint64_t *out) {
    uint64_t result = 0;
    for (int shift = 0; shift <= max_shift; shift += 7) {
        if (*pos >= limit) return GIVE_UP;
        unsigned char byte = b[(*pos)++];
        if (shift == 63 && (byte & 0x7F) > 1) return GIVE_UP;  /* over 64 bits */
        result |= (uint64_t)(byte & 0x7F) << shift;
        if (byte < 128) {
            if (result > bound) return GIVE_UP;
            *out = result;
            return TAKEN;
        }
    }
    return GIVE_UP;
}

/* Raw Snappy (format_description.txt of google/snappy): a varint32 length, then literals and
 * copies. 0 and the decompressed bytes in *out (grown as needed), or GIVE_UP for anything the
 * reference decoder would not turn into exactly the declared length. */
static int snappy(const unsigned char *src, Py_ssize_t n, unsigned char **out, size_t *room,
                  Py_ssize_t *out_len) {
    Py_ssize_t ip = 0, op = 0;
    uint64_t ulen = 0;
    for (int shift = 0;; shift += 7) {
        if (ip >= n || shift > 28) return GIVE_UP;
        unsigned char b = src[ip++];
        ulen |= (uint64_t)(b & 0x7F) << shift;
        if (!(b & 0x80)) break;
    }
    if (ulen > MAX_BLOCK_SIZE || ulen > UINT32_MAX) return GIVE_UP;
    if (*room < ulen + 1) {
        unsigned char *grown = PyMem_Realloc(*out, (size_t)ulen + 1);
        if (grown == NULL) { PyErr_NoMemory(); return ERROR; }
        *out = grown;
        *room = (size_t)ulen + 1;
    }
    unsigned char *dst = *out;
    Py_ssize_t total = (Py_ssize_t)ulen;
    while (ip < n) {
        unsigned char tag = src[ip++];
        Py_ssize_t len, offset;
        if ((tag & 3) == 0) {  /* literal */
            len = tag >> 2;
            if (len >= 60) {
                int bytes = (int)len - 59;
                if (ip + bytes > n) return GIVE_UP;
                len = 0;
                for (int i = 0; i < bytes; i++) len |= (Py_ssize_t)src[ip + i] << (8 * i);
                ip += bytes;
            }
            len += 1;
            if (len > n - ip || len > total - op) return GIVE_UP;
            memcpy(dst + op, src + ip, (size_t)len);
            ip += len;
            op += len;
            continue;
        }
        if ((tag & 3) == 1) {
            if (ip + 1 > n) return GIVE_UP;
            len = ((tag >> 2) & 7) + 4;
            offset = ((Py_ssize_t)(tag >> 5) << 8) | src[ip];
            ip += 1;
        } else if ((tag & 3) == 2) {
            if (ip + 2 > n) return GIVE_UP;
            len = (tag >> 2) + 1;
            offset = (Py_ssize_t)src[ip] | ((Py_ssize_t)src[ip + 1] << 8);
            ip += 2;
        } else {
            if (ip + 4 > n) return GIVE_UP;
            len = (tag >> 2) + 1;
            offset = (Py_ssize_t)le32(src + ip);
            ip += 4;
        }
        if (offset == 0 || offset > op || len > total - op) return GIVE_UP;
        if (offset >= len) {
            memcpy(dst + op, dst + op - offset, (size_t)len);
        } else {  /* the copy overlaps what it writes: byte by byte, as the format means */
            for (Py_ssize_t i = 0; i < len; i++) dst[op + i] = dst[op - offset + i];
        }
        op += len;
    }
    if (op != total) return GIVE_UP;
    *out_len = total;
    return TAKEN;
}

/* The checksum of the block at data[offset:end] and its compression byte, as RocksDB stores
 * it (checksums.py compute_builtin_checksum; digest: the kind's Python function). */
static int block_checksum(const unsigned char *data, Py_ssize_t offset, Py_ssize_t end,
                          int kind, PyObject *digest, uint32_t *out) {
    Py_ssize_t n = kind == 4 ? end - offset : end + 1 - offset;
    PyObject *body = kind == 1
        ? PyBytes_FromStringAndSize((const char *)data + offset, n)  /* google_crc32c: bytes */
        : PyMemoryView_FromMemory((char *)data + offset, n, PyBUF_READ);
    if (body == NULL) return ERROR;
    PyObject *value = PyObject_CallOneArg(digest, body);
    Py_DECREF(body);
    if (value == NULL) return ERROR;
    unsigned long long full = PyLong_AsUnsignedLongLongMask(value);
    Py_DECREF(value);
    if (full == (unsigned long long)-1 && PyErr_Occurred()) return ERROR;
    uint32_t c = (uint32_t)full;
    if (kind == 1) {  /* crc32c::Mask */
        c = ((c >> 15) | (c << 17)) + CRC32C_MASK_DELTA;
    } else if (kind == 4) {
        c ^= (uint32_t)data[end] * XXH3_LAST_BYTE_PRIME;
    }
    *out = c;
    return TAKEN;
}

/* The entries of one decompressed data block (block.py decode_data_block: each entry three
 * varint32s, then the key delta and the value; the internal key is the previous one's first
 * ``shared`` bytes and the delta, its last 8 bytes the trailer), appended; the trailers to
 * *trailers. GIVE_UP for a block that is not well formed or has a hash index (the Python
 * reader says what it is). */
static int block_entries(const unsigned char *b, Py_ssize_t size, PyObject *keys,
                         PyObject *values, uint64_t **trailers, Py_ssize_t *count,
                         Py_ssize_t *cap, uint64_t global_seqno, unsigned char **key,
                         Py_ssize_t *key_room) {
    if (size < 4) return GIVE_UP;
    uint32_t packed = le32(b + size - 4);
    if (packed & 0xD0000000u) return GIVE_UP;  /* hash index, reserved, separated sections */
    Py_ssize_t num_restarts = packed & ((1u << 28) - 1);
    Py_ssize_t end = size - 4;
    if (num_restarts * 4 > end) return GIVE_UP;
    Py_ssize_t limit = end - 4 * num_restarts;
    if (num_restarts == 0 && limit != 0) return GIVE_UP;
    Py_ssize_t pos = 0, key_len = 0;
    while (pos < limit) {
        uint64_t shared, non_shared, value_length;
        if (pos + 3 <= limit && (b[pos] | b[pos + 1] | b[pos + 2]) < 128) {
            shared = b[pos];
            non_shared = b[pos + 1];
            value_length = b[pos + 2];
            pos += 3;
        } else if (varint(b, &pos, limit, 28, 0xFFFFFFFFu, &shared)
                   || varint(b, &pos, limit, 28, 0xFFFFFFFFu, &non_shared)
                   || varint(b, &pos, limit, 28, 0xFFFFFFFFu, &value_length)) {
            return GIVE_UP;
        }
        if ((Py_ssize_t)shared > key_len || non_shared > (uint64_t)(limit - pos)
                || value_length > (uint64_t)(limit - pos - (Py_ssize_t)non_shared))
            return GIVE_UP;
        Py_ssize_t kend = pos + (Py_ssize_t)non_shared, vend = kend + (Py_ssize_t)value_length;
        Py_ssize_t full = (Py_ssize_t)shared + (Py_ssize_t)non_shared;
        if (full < 8) return GIVE_UP;  /* an internal key shorter than its trailer */
        if (full > *key_room) {
            Py_ssize_t room = full * 2 + 256;
            unsigned char *grown = PyMem_Realloc(*key, (size_t)room);
            if (grown == NULL) { PyErr_NoMemory(); return ERROR; }
            *key = grown;
            *key_room = room;
        }
        memcpy(*key + shared, b + pos, (size_t)non_shared);
        key_len = full;
        uint64_t trailer = le64(*key + full - 8);
        if (global_seqno) trailer = (global_seqno << 8) | (trailer & 0xFF);
        if (*count == *cap) {
            Py_ssize_t grown = *cap ? *cap * 2 : 1024;
            uint64_t *more = PyMem_Realloc(*trailers, (size_t)grown * sizeof(uint64_t));
            if (more == NULL) { PyErr_NoMemory(); return ERROR; }
            *trailers = more;
            *cap = grown;
        }
        (*trailers)[(*count)++] = trailer;
        PyObject *k = PyBytes_FromStringAndSize((const char *)*key, full - 8);
        PyObject *v = PyBytes_FromStringAndSize((const char *)b + kend, (Py_ssize_t)value_length);
        int failed = k == NULL || v == NULL || PyList_Append(keys, k) || PyList_Append(values, v);
        Py_XDECREF(k);
        Py_XDECREF(v);
        if (failed) return ERROR;
        pos = vend;
    }
    return TAKEN;
}

/* data_run(data, offsets, sizes, footer_offset, checksum_kind, digest, base_context,
 *          global_seqno, separators, previous) -> (keys, trailers, values, starts, types,
 *                                                   order) | None
 *
 * The data blocks at (offsets[i], sizes[i]) of one table's bytes, read as SstFile.read_block
 * reads them (in the table, before its footer; checksum verified, format version 6's context
 * removed; uncompressed or Snappy) and decoded as decode_data_block decodes each: their
 * entries concatenated, where each block's first entry is, the set of value types. None for
 * anything else -- a checksum that does not match, another compression, a block with a hash
 * index, anything not well formed -- and the Python reader reads the run, raising what it
 * deserves. checksum_kind 0 (none) needs no digest. As SstFile.typed_data_blocks checks
 * them, each block's keys must be above ``previous`` (the last key of the block before) and at
 * most its index separator (else None); ``order``: 2 the run's keys increase strictly, 1
 * they never decrease, 0 they decrease somewhere (merge.py _key_order).
 */
PyObject *rocksdb_data_run(PyObject *self, PyObject *args) {
    Py_buffer buf;
    PyObject *offsets, *sizes, *digest, *separators, *previous;
    Py_ssize_t footer_offset;
    int kind;
    unsigned long long base_context, global_seqno;
    if (!PyArg_ParseTuple(args, "y*O!O!niOKKO!S", &buf, &PyList_Type, &offsets, &PyList_Type,
                          &sizes, &footer_offset, &kind, &digest, &base_context, &global_seqno,
                          &PyList_Type, &separators, &previous))
        return NULL;
    const unsigned char *data = buf.buf;
    Py_ssize_t n = PyList_GET_SIZE(offsets);
    PyObject *keys = PyList_New(0), *values = PyList_New(0), *starts = PyList_New(0);
    PyObject *result = NULL;
    uint64_t *trailers = NULL;
    Py_ssize_t count = 0, cap = 0;
    unsigned char *scratch = NULL;
    size_t room = 0;
    unsigned char *key = NULL;  /* the internal key being built */
    Py_ssize_t key_room = 0;
    int r = TAKEN;
    if (keys == NULL || values == NULL || starts == NULL) r = ERROR;
    if (PyList_GET_SIZE(sizes) != n || PyList_GET_SIZE(separators) != n || kind < 0
            || kind > 4 || footer_offset > buf.len || !all_bytes(separators))
        r = GIVE_UP;
    PyObject *last = previous;  /* the last key of the block before (borrowed) */
    for (Py_ssize_t i = 0; i < n && r == TAKEN; i++) {
        Py_ssize_t offset = PyLong_AsSsize_t(PyList_GET_ITEM(offsets, i));
        Py_ssize_t size = PyLong_AsSsize_t(PyList_GET_ITEM(sizes, i));
        if ((offset == -1 || size == -1) && PyErr_Occurred()) { r = ERROR; break; }
        if (offset < 0 || size < 0 || offset + size + 5 > footer_offset) { r = GIVE_UP; break; }
        Py_ssize_t end = offset + size;
        if (kind != 0) {
            uint32_t computed;
            r = block_checksum(data, offset, end, kind, digest, &computed);
            if (r != TAKEN) break;
            uint32_t modifier = 0;
            if (base_context) {
                uint64_t o = (uint64_t)offset;
                modifier = (uint32_t)base_context ^ (uint32_t)((o & 0xFFFFFFFFu) + (o >> 32));
            }
            if ((uint32_t)(le32(data + end + 1) - modifier) != computed) { r = GIVE_UP; break; }
        }
        const unsigned char *block = data + offset;
        Py_ssize_t block_size = size;
        if (data[end] == 1) {
            r = snappy(data + offset, size, &scratch, &room, &block_size);
            if (r != TAKEN) break;
            block = scratch;
        } else if (data[end] != 0) {
            r = GIVE_UP;
            break;
        }
        PyObject *start = PyLong_FromSsize_t(PyList_GET_SIZE(keys));
        if (start == NULL || PyList_Append(starts, start)) r = ERROR;
        Py_XDECREF(start);
        Py_ssize_t first = PyList_GET_SIZE(keys);
        if (r == TAKEN)
            r = block_entries(block, block_size, keys, values, &trailers, &count, &cap,
                              global_seqno, &key, &key_room);
        if (r == TAKEN && PyList_GET_SIZE(keys) > first) {
            if (bytes_cmp(PyList_GET_ITEM(keys, first), last) < 0
                    || bytes_cmp(PyList_GET_ITEM(keys, PyList_GET_SIZE(keys) - 1),
                                 PyList_GET_ITEM(separators, i)) > 0) {
                r = GIVE_UP;  /* out of order with the block before, or above its separator */
                break;
            }
            last = PyList_GET_ITEM(keys, PyList_GET_SIZE(keys) - 1);
        }
    }
    int order = 2;
    for (Py_ssize_t i = 1; r == TAKEN && i < count; i++) {
        int c = bytes_cmp(PyList_GET_ITEM(keys, i - 1), PyList_GET_ITEM(keys, i));
        if (c > 0) { order = 0; break; }
        if (c == 0) order = 1;
    }
    if (r == TAKEN) {
        PyObject *listed = PyList_New(count), *types = PySet_New(NULL);
        if (listed == NULL || types == NULL) r = ERROR;
        int same = 1;
        for (Py_ssize_t i = 1; i < count && same; i++) same = trailers[i] == trailers[0];
        PyObject *first = NULL;
        for (Py_ssize_t i = 0; i < count && r == TAKEN; i++) {
            PyObject *t;
            if (same && first != NULL) {
                t = first;
                Py_INCREF(t);
            } else {
                t = PyLong_FromUnsignedLongLong(trailers[i]);
                if (t == NULL) { r = ERROR; break; }
                if (first == NULL) first = t;
            }
            PyList_SET_ITEM(listed, i, t);
        }
        unsigned char seen[256] = {0};
        for (Py_ssize_t i = 0; i < count && r == TAKEN; i++) {
            unsigned char type = (unsigned char)(trailers[i] & 0xFF);
            if (seen[type]) continue;
            seen[type] = 1;
            PyObject *t = PyLong_FromLong(type);
            if (t == NULL || PySet_Add(types, t)) r = ERROR;
            Py_XDECREF(t);
            if (same) break;
        }
        if (r == TAKEN) {
            PyObject *frozen = PyFrozenSet_New(types);
            PyObject *ordered = PyLong_FromLong(order);
            if (frozen != NULL && ordered != NULL)
                result = PyTuple_Pack(6, keys, listed, values, starts, frozen, ordered);
            Py_XDECREF(frozen);
            Py_XDECREF(ordered);
        }
        Py_XDECREF(listed);
        Py_XDECREF(types);
    }
    PyMem_Free(trailers);
    PyMem_Free(scratch);
    PyMem_Free(key);
    PyBuffer_Release(&buf);
    Py_XDECREF(keys);
    Py_XDECREF(values);
    Py_XDECREF(starts);
    if (r == ERROR) return NULL;
    if (r == GIVE_UP) Py_RETURN_NONE;
    return result;
}

/* ------------------------------------------------------------------------------------------
 * RocksDB merging (rocksdb/merge.py)
 */


/* key_order(keys) -> 2 (strictly increasing), 1 (never decreasing), 0 (decreasing somewhere),
 * None (an item is not bytes): merge.py _Cursor.fill's order checks in one pass. */
PyObject *rocksdb_key_order(PyObject *self, PyObject *keys) {
    if (!PyList_Check(keys) || !all_bytes(keys)) Py_RETURN_NONE;
    Py_ssize_t n = PyList_GET_SIZE(keys);
    int order = 2;
    for (Py_ssize_t i = 1; i < n; i++) {
        int c = bytes_cmp(PyList_GET_ITEM(keys, i - 1), PyList_GET_ITEM(keys, i));
        if (c > 0) { order = 0; break; }
        if (c == 0) order = 1;
    }
    return PyLong_FromLong(order);
}

/* trailer_span(trailers) -> (min, max) of a non-empty list of ints below 2**64, or None. */
PyObject *rocksdb_trailer_span(PyObject *self, PyObject *trailers) {
    if (!PyList_Check(trailers) || PyList_GET_SIZE(trailers) == 0) Py_RETURN_NONE;
    Py_ssize_t n = PyList_GET_SIZE(trailers);
    PyObject *low = PyList_GET_ITEM(trailers, 0), *high = low, *seen = NULL;
    unsigned long long lo = 0, hi = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PyList_GET_ITEM(trailers, i);
        if (item == seen) continue;  /* a bottommost table's one trailer, repeated */
        if (!PyLong_CheckExact(item)) Py_RETURN_NONE;
        unsigned long long t = PyLong_AsUnsignedLongLong(item);
        if (t == (unsigned long long)-1 && PyErr_Occurred()) {
            PyErr_Clear();
            Py_RETURN_NONE;
        }
        if (seen == NULL || t < lo) { lo = t; low = item; }
        if (seen == NULL || t > hi) { hi = t; high = item; }
        seen = item;
    }
    return PyTuple_Pack(2, low, high);
}

/* onto_oldest(base_keys, base_values, newer, merge_type, delimiter, values_kind) -> bool | None
 *
 * merge.py _onto_oldest: ``newer`` is a list of (keys, trailers, values, kind) runs (kind
 * ``values_kind``: only values),
 * oldest first, whose every key must be among ``base_keys`` (sorted, bytes); then each newer
 * version replaces the value below it, or, a merge operand (trailer & 0xFF == merge_type), is
 * appended to it after ``delimiter``; base_values is updated in place. False, with nothing
 * changed, where a newer key is not among base_keys; None where an item is not bytes.
 */
PyObject *rocksdb_onto_oldest(PyObject *self, PyObject *args) {
    PyObject *base_keys, *base_values, *newer, *delimiter;
    int merge_type;
    long values_kind;
    if (!PyArg_ParseTuple(args, "O!O!O!iO!l", &PyList_Type, &base_keys, &PyList_Type,
                          &base_values, &PyList_Type, &newer, &merge_type, &PyBytes_Type,
                          &delimiter, &values_kind))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(base_keys), runs = PyList_GET_SIZE(newer), total = 0;
    if (PyList_GET_SIZE(base_values) != n || !all_bytes(base_keys) || !all_bytes(base_values))
        Py_RETURN_NONE;
    for (Py_ssize_t r = 0; r < runs; r++) {
        PyObject *run = PyList_GET_ITEM(newer, r);
        if (!PyTuple_Check(run) || PyTuple_GET_SIZE(run) != 4) Py_RETURN_NONE;
        PyObject *keys = PyTuple_GET_ITEM(run, 0), *trailers = PyTuple_GET_ITEM(run, 1),
                 *values = PyTuple_GET_ITEM(run, 2);
        if (!PyList_Check(keys) || !PyList_Check(trailers) || !PyList_Check(values)
                || PyList_GET_SIZE(trailers) != PyList_GET_SIZE(keys)
                || PyList_GET_SIZE(values) != PyList_GET_SIZE(keys)
                || !all_bytes(keys) || !all_bytes(values))
            Py_RETURN_NONE;
        total += PyList_GET_SIZE(keys);
    }
    Py_ssize_t *at = PyMem_Malloc((size_t)(total ? total : 1) * sizeof(Py_ssize_t));
    if (at == NULL) return PyErr_NoMemory();
    Py_ssize_t k = 0;
    for (Py_ssize_t r = 0; r < runs; r++) {
        PyObject *keys = PyTuple_GET_ITEM(PyList_GET_ITEM(newer, r), 0);
        Py_ssize_t m = PyList_GET_SIZE(keys), from = 0;
        for (Py_ssize_t i = 0; i < m; i++, k++) {
            PyObject *key = PyList_GET_ITEM(keys, i);
            Py_ssize_t lo = from, hi = n;  /* bisect_left, from the previous key's place on */
            if (i > 0 && bytes_cmp(key, PyList_GET_ITEM(keys, i - 1)) < 0) lo = 0;
            while (lo < hi) {
                Py_ssize_t mid = lo + (hi - lo) / 2;
                if (bytes_cmp(PyList_GET_ITEM(base_keys, mid), key) < 0) lo = mid + 1;
                else hi = mid;
            }
            if (lo >= n || bytes_cmp(PyList_GET_ITEM(base_keys, lo), key) != 0) {
                PyMem_Free(at);
                Py_RETURN_FALSE;
            }
            at[k] = from = lo;
        }
    }
    k = 0;
    const char *sep = PyBytes_AS_STRING(delimiter);
    Py_ssize_t sep_len = PyBytes_GET_SIZE(delimiter);
    for (Py_ssize_t r = 0; r < runs; r++) {
        PyObject *run = PyList_GET_ITEM(newer, r);
        PyObject *trailers = PyTuple_GET_ITEM(run, 1), *values = PyTuple_GET_ITEM(run, 2);
        long kind = PyLong_AsLong(PyTuple_GET_ITEM(run, 3));
        if (kind == -1 && PyErr_Occurred()) { PyMem_Free(at); return NULL; }
        int only_values = kind == values_kind;
        Py_ssize_t m = PyList_GET_SIZE(values);
        for (Py_ssize_t i = 0; i < m; i++, k++) {
            PyObject *value = PyList_GET_ITEM(values, i), *put;
            int merge = 0;
            if (!only_values) {
                PyObject *trailer = PyList_GET_ITEM(trailers, i);
                unsigned long long t = PyLong_AsUnsignedLongLongMask(trailer);
                if (t == (unsigned long long)-1 && PyErr_Occurred()) { PyMem_Free(at); return NULL; }
                merge = (int)(t & 0xFF) == merge_type;
            }
            if (merge) {
                PyObject *below = PyList_GET_ITEM(base_values, at[k]);
                Py_ssize_t lb = PyBytes_GET_SIZE(below), lv = PyBytes_GET_SIZE(value);
                put = PyBytes_FromStringAndSize(NULL, lb + sep_len + lv);
                if (put == NULL) { PyMem_Free(at); return NULL; }
                char *to = PyBytes_AS_STRING(put);
                memcpy(to, PyBytes_AS_STRING(below), (size_t)lb);
                memcpy(to + lb, sep, (size_t)sep_len);
                memcpy(to + lb + sep_len, PyBytes_AS_STRING(value), (size_t)lv);
            } else {
                put = value;
                Py_INCREF(put);
            }
            PyList_SetItem(base_values, at[k], put);  /* steals put, drops the old value */
        }
    }
    PyMem_Free(at);
    Py_RETURN_TRUE;
}

/* index_run(block, pos, limit, delta, with_seq, first_key, target, end)
 *     -> (separators, offsets, sizes) | None
 *
 * block.py IndexBlock._entries_from from ``pos`` (a restart point): the entries whose
 * separator's user key is >= target, up to and including the first whose is >= end (None: to
 * the block's end), as three lists; checked as that generator checks them (every entry from
 * pos on, in key and offset order). None for anything it would raise on (it then does).
 */
PyObject *rocksdb_index_run(PyObject *self, PyObject *args) {
    Py_buffer buf;
    Py_ssize_t pos, limit;
    int delta, with_seq, first_key;
    PyObject *target, *end_key;
    if (!PyArg_ParseTuple(args, "y*nnpppSO", &buf, &pos, &limit, &delta, &with_seq, &first_key,
                          &target, &end_key))
        return NULL;
    const unsigned char *b = buf.buf;
    PyObject *seps = PyList_New(0), *offsets = PyList_New(0), *sizes = PyList_New(0);
    PyObject *result = NULL;
    unsigned char *key = NULL;
    Py_ssize_t key_len = 0, key_room = 0;
    int r = TAKEN, have_previous = 0;
    uint64_t prev_offset = 0, prev_size = 0;
    PyObject *prev_user = NULL;
    if (seps == NULL || offsets == NULL || sizes == NULL) r = ERROR;
    if (end_key != Py_None && !PyBytes_Check(end_key)) r = GIVE_UP;
    if (pos < 0 || limit > buf.len || pos > limit) r = GIVE_UP;
    while (r == TAKEN && pos < limit) {
        uint64_t shared, non_shared, value_length = 0;
        if (varint(b, &pos, limit, 28, 0xFFFFFFFFu, &shared)
                || varint(b, &pos, limit, 28, 0xFFFFFFFFu, &non_shared)
                || (!delta && varint(b, &pos, limit, 28, 0xFFFFFFFFu, &value_length))) {
            r = GIVE_UP;
            break;
        }
        Py_ssize_t kend = pos + (Py_ssize_t)non_shared;
        if ((Py_ssize_t)shared > key_len || non_shared > (uint64_t)limit || kend > limit) {
            r = GIVE_UP;
            break;
        }
        if ((Py_ssize_t)(shared + non_shared) > key_room) {
            Py_ssize_t room = (Py_ssize_t)(shared + non_shared) * 2 + 64;
            unsigned char *grown = PyMem_Realloc(key, (size_t)room);
            if (grown == NULL) { PyErr_NoMemory(); r = ERROR; break; }
            key = grown;
            key_room = room;
        }
        memcpy(key + shared, b + pos, (size_t)non_shared);
        key_len = (Py_ssize_t)(shared + non_shared);
        Py_ssize_t value_end = delta ? limit : kend + (Py_ssize_t)value_length;
        if (!delta && (value_length > (uint64_t)limit || value_end > limit)) { r = GIVE_UP; break; }
        uint64_t offset, size;
        Py_ssize_t at = kend;
        if (delta && shared && have_previous) {
            uint64_t zz;
            if (varint(b, &at, value_end, 63, UINT64_MAX, &zz)) { r = GIVE_UP; break; }
            int64_t d = (int64_t)(zz >> 1) ^ -(int64_t)(zz & 1);
            if (prev_size > INT64_MAX / 2 || prev_offset > INT64_MAX / 2) { r = GIVE_UP; break; }
            int64_t new_size = (int64_t)prev_size + d;
            if (new_size < 0) { r = GIVE_UP; break; }
            offset = prev_offset + prev_size + 5;
            size = (uint64_t)new_size;
        } else if (delta && shared) {
            r = GIVE_UP;
            break;
        } else {
            if (varint(b, &at, value_end, 63, UINT64_MAX, &offset)
                    || varint(b, &at, value_end, 63, UINT64_MAX, &size)) {
                r = GIVE_UP;
                break;
            }
        }
        if (first_key) {
            uint64_t length;
            if (varint(b, &at, value_end, 28, 0xFFFFFFFFu, &length)
                    || length > (uint64_t)(value_end - at)) {
                r = GIVE_UP;
                break;
            }
            at += (Py_ssize_t)length;
        }
        pos = delta ? at : value_end;
        Py_ssize_t user_len = key_len;
        if (with_seq) {
            if (key_len < 8) { r = GIVE_UP; break; }
            user_len -= 8;
        }
        if (offset > (uint64_t)PY_SSIZE_T_MAX || size > (uint64_t)PY_SSIZE_T_MAX) {
            r = GIVE_UP;
            break;
        }
        PyObject *user = PyBytes_FromStringAndSize((const char *)key, user_len);
        if (user == NULL) { r = ERROR; break; }
        if (have_previous && (bytes_cmp(user, prev_user) < 0 || offset <= prev_offset)) {
            Py_DECREF(user);
            r = GIVE_UP;
            break;
        }
        Py_XDECREF(prev_user);
        prev_user = user;
        have_previous = 1;
        prev_offset = offset;
        prev_size = size;
        if (bytes_cmp(user, target) >= 0) {
            PyObject *o = PyLong_FromUnsignedLongLong(offset);
            PyObject *z = PyLong_FromUnsignedLongLong(size);
            int failed = o == NULL || z == NULL || PyList_Append(seps, user)
                || PyList_Append(offsets, o) || PyList_Append(sizes, z);
            Py_XDECREF(o);
            Py_XDECREF(z);
            if (failed) { r = ERROR; break; }
            if (end_key != Py_None && bytes_cmp(user, end_key) >= 0) break;
        }
    }
    if (r == TAKEN) result = PyTuple_Pack(3, seps, offsets, sizes);
    Py_XDECREF(prev_user);
    PyMem_Free(key);
    PyBuffer_Release(&buf);
    Py_XDECREF(seps);
    Py_XDECREF(offsets);
    Py_XDECREF(sizes);
    if (r == ERROR) return NULL;
    if (r == GIVE_UP) Py_RETURN_NONE;
    return result;
}

