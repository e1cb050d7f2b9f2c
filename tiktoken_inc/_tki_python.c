/*
 * _tki_python.c: the few functions of tiktoken_inc._tki that take and return
 * Python objects, so that the commonest calls cost one C call from Python.
 *
 * Everything else in _tki is the C core (csrc/) seen through cffi, which
 * speaks only C types: an encode through cffi pays for encoding the str to
 * bytes, for the call, and then for a Python int per id (ffi.unpack).  On
 * documents of a few hundred bytes those costs were as large as the encoding
 * itself.  Here:
 *   - the text's UTF-8 is read where CPython keeps it (no copy for ASCII);
 *   - the GIL is released only for texts long enough to pay for it;
 *   - a str with lone surrogates is made UTF-8 as tiktoken makes it (pairs
 *     joined, lone ones U+FFFD) in one pass, not through CPython's codecs;
 *   - id lists are filled from a table of Python ints made once per id, and
 *     handed out untracked by the cyclic garbage collector.  A list that holds
 *     only ints can be part of no reference cycle, yet while tracked every
 *     collection walked all its ids: a program that keeps its token lists
 *     (a per-document loop, a tokenized dataset) paid for that again and again
 *     (~14% of a per-document loop over English text; pathological/bench_gc.py).
 *     The cost: a cycle that a caller builds *through* such a list (appending
 *     an object that refers back to it) is freed only when broken by hand;
 *     `list(ids)` is a tracked copy for whoever needs that.
 *
 * tki_python_install adds the functions to the module tiktoken_inc._tki
 * (cffi calls it once, without the GIL; it takes the GIL itself).
 *
 * The int table is the one mutable global here: slot i holds the int i once
 * some list has needed it, and is never freed (at most ID_TABLE_SIZE ints,
 * about 8 MiB).  It is read and written only with the GIL held; a build
 * without a GIL makes a new int per id instead.  (The one-shot scratch is
 * per thread, in the thread state's dict, under a key made once.)
 */
#include <Python.h>
#include <structmember.h>
#include <stdint.h>
#include <string.h>

#include "tiktoken_inc.h"

#define ID_TABLE_SIZE ((size_t)1 << 18)      /* ids below this share one int object  */
#define STACK_IDS 1024                       /* outputs this small live on the stack */
#define GIL_FREE_MIN_BYTES ((Py_ssize_t)2048) /* shorter texts keep the GIL          */
#define BINDING_CAPSULE "tiktoken_inc._tki.binding"

#ifndef Py_GIL_DISABLED
static PyObject *id_table[ID_TABLE_SIZE];
#endif

/*
 * Large blocks about to be written for the first time (an id buffer, a list's
 * items) get tki_advise_huge_pages.  A block this large comes fresh from mmap,
 * and faulting it in 4 KiB at a time cost more than filling it: a 16 MiB run
 * of digits makes 5.6 million ids, 67 MB of buffer and list, ~16,000 page
 * faults.
 */
#define HUGE_ADVICE_MIN_BYTES ((size_t)8 << 20)

static void advise_huge_pages(void *memory, size_t size)
{
    if (size >= HUGE_ADVICE_MIN_BYTES) tki_advise_huge_pages(memory, size);
}

/* Starts loading the cache line at `address` (to be written when `write` is 1):
 * a hint, and nothing where the compiler has no prefetch. */
#if defined(__GNUC__) || defined(__clang__)
#define BINDING_PREFETCH(address, write) __builtin_prefetch((address), (write))
#else
#define BINDING_PREFETCH(address, write) ((void)0)
#endif

#ifndef Py_GIL_DISABLED
/* The int of `id` from the table (made now if not made yet), or beyond the
 * table a new int: a new reference either way; NULL with an exception set. */
static PyObject *int_of_id(uint32_t id)
{
    if (id >= ID_TABLE_SIZE) return PyLong_FromUnsignedLong(id);
    PyObject *value = id_table[id];
    if (value == NULL) {
        value = PyLong_FromUnsignedLong(id);
        if (value == NULL) return NULL;
        id_table[id] = value; /* the table's own reference */
    }
    Py_INCREF(value);
    return value;
}

/* Item i of pass 1 of list_of_ids: the table's int, borrowed (an id beyond
 * the table: a new int, owned); -1 with an exception set. */
static inline int borrow_item(const uint32_t *ids, size_t i, PyObject **items)
{
    const uint32_t id = ids[i];
    PyObject *value = id < ID_TABLE_SIZE ? id_table[id] : NULL;
    if (value == NULL) {
        value = PyLong_FromUnsignedLong(id);
        if (value == NULL) return -1;
        if (id < ID_TABLE_SIZE) id_table[id] = value; /* the table's own reference */
    }
    items[i] = value;
    return 0;
}
#endif

#ifndef Py_GIL_DISABLED
/*
 * A new list with room for `count` items and none in it yet (its size is 0, so
 * that dealloc and the garbage collector see no item), its item array in
 * *items: the caller sets the items and then the size.  PyList_New(count)
 * hands out a zeroed array, a write of every item that list_of_ids writes
 * again at once: encoding the corpora per document took 0.4-1.4% more
 * instructions with it (cl100k_base, o200k_base), 1.5-2.3% with r50k_base
 * on Chinese and multilingual text (more ids a byte).  The array is
 * PyMem_Malloc's, which list_dealloc frees with PyMem_Free.  (Not in the
 * free-threaded build, whose lists keep their items another way.)
 */
static PyObject *unfilled_list(size_t count, PyObject ***items)
{
    if (count > (size_t)PY_SSIZE_T_MAX / sizeof(PyObject *)) return PyErr_NoMemory();
    PyObject **array = count > 0 ? PyMem_Malloc(count * sizeof(PyObject *)) : NULL;
    if (count > 0 && array == NULL) return PyErr_NoMemory();
    PyObject *list = PyList_New(0);
    if (list == NULL) {
        PyMem_Free(array);
        return NULL;
    }
    ((PyListObject *)list)->ob_item = array;
    ((PyListObject *)list)->allocated = (Py_ssize_t)count;
    *items = array;
    return list;
}
#endif

/* A new list of ids[0..count).  A short list (a document's: up to ONE_PASS_IDS
 * ids) is filled in one pass, each item's reference counted as it is set,
 * after two short loops that start the loads of its table slots and then of
 * its ints (per document, o200k_base, Chinese and multilingual text encode
 * 3-9% faster than with the one pass alone: its loads waited on each other).  A
 * longer one in two passes over its items: the first takes each id's int from
 * the table (making the ints not made yet), the second counts the references.
 * Each pass loads what it needs further on early (a table of 2^18 pointers and
 * the ints it holds do not stay in the nearer caches), so their misses
 * overlap: each iteration is a few instructions with no test that depends on
 * a load, and the last stretch of each pass, with nothing left to load ahead,
 * is a loop of its own (no test of whether to load ahead per item). */
static PyObject *list_of_ids(const uint32_t *ids, size_t count)
{
    enum { ONE_PASS_IDS = 512, SLOTS_AHEAD = 64, OBJECTS_AHEAD = 16 };
#ifndef Py_GIL_DISABLED
    PyObject **items = NULL;
    PyObject *list = unfilled_list(count, &items);
    if (list == NULL) return NULL;
    advise_huge_pages(items, count * sizeof(PyObject *));
    if (count <= ONE_PASS_IDS) {
        for (size_t i = 0; i < count; i++) BINDING_PREFETCH(&id_table[ids[i] & (ID_TABLE_SIZE - 1)], 0);
        for (size_t i = 0; i < count; i++) {
            PyObject *value = ids[i] < ID_TABLE_SIZE ? id_table[ids[i]] : NULL;
            if (value != NULL) BINDING_PREFETCH(value, 1);
        }
        for (size_t i = 0; i < count; i++) {
            if ((items[i] = int_of_id(ids[i])) == NULL) {
                Py_SET_SIZE(list, (Py_ssize_t)i); /* (each item set is the list's reference) */
                Py_DECREF(list);
                return NULL;
            }
        }
        Py_SET_SIZE(list, (Py_ssize_t)count);
        PyObject_GC_UnTrack(list);
        return list;
    }
    /* 1: the table's ints, borrowed for now (an id beyond the table: a new int, owned). */
    size_t i = 0;
    int failed = 0;
    for (; !failed && i < count - SLOTS_AHEAD; i++) {
        BINDING_PREFETCH(&id_table[ids[i + SLOTS_AHEAD] & (ID_TABLE_SIZE - 1)], 0);
        failed = borrow_item(ids, i, items);
    }
    for (; !failed && i < count; i++) failed = borrow_item(ids, i, items);
    if (failed) {
        for (size_t j = 0; j + 1 < i; j++) { /* (the ints beyond the table are owned) */
            if (ids[j] >= ID_TABLE_SIZE) Py_DECREF(items[j]);
        }
        Py_DECREF(list); /* (its size is still 0) */
        return NULL;
    }
    /* 2: a reference for the list to each int of the table. */
    for (i = 0; i < count - OBJECTS_AHEAD; i++) {
        BINDING_PREFETCH(items[i + OBJECTS_AHEAD], 1);
        if (ids[i] < ID_TABLE_SIZE) Py_INCREF(items[i]);
    }
    for (; i < count; i++) {
        if (ids[i] < ID_TABLE_SIZE) Py_INCREF(items[i]);
    }
    Py_SET_SIZE(list, (Py_ssize_t)count);
#else
    PyObject *list = PyList_New((Py_ssize_t)count);
    if (list == NULL) return NULL;
    PyObject **items = ((PyListObject *)list)->ob_item;
    advise_huge_pages(items, count * sizeof(PyObject *));
    for (size_t i = 0; i < count; i++) {
        PyObject *value = PyLong_FromUnsignedLong(ids[i]);
        if (value == NULL) {
            Py_DECREF(list); /* (the items not set yet are NULL) */
            return NULL;
        }
        items[i] = value;
    }
#endif
    /* A list of ints is no part of any reference cycle: see the file's comment. */
    PyObject_GC_UnTrack(list);
    return list;
}

static PyObject *raise_status(int32_t status)
{
    PyErr_Format(status == TKI_ERR_NOMEM ? PyExc_MemoryError : PyExc_ValueError, "encoding failed: %s",
                 tki_status_message(status));
    return NULL;
}

/* A str's UTF-8 where CPython keeps it (made on first use and kept with the str):
 * 1 with *data and *length set; 0 for a str with lone surrogates, which has no
 * UTF-8 (no exception left set: each caller says what such a str gets); -1 with
 * an exception (memory). */
static int kept_utf8(PyObject *text, const char **data, Py_ssize_t *length)
{
    *data = PyUnicode_AsUTF8AndSize(text, length);
    if (*data != NULL) return 1;
    if (!PyErr_ExceptionMatches(PyExc_UnicodeEncodeError)) return -1;
    PyErr_Clear();
    return 0;
}

/* The UTF-8 of a str (CPython's own copy), or a bytes object's contents. */
static const char *utf8_of(PyObject *text, Py_ssize_t *length)
{
    if (PyUnicode_Check(text)) return PyUnicode_AsUTF8AndSize(text, length);
    if (PyBytes_Check(text)) {
        *length = PyBytes_GET_SIZE(text);
        return PyBytes_AS_STRING(text);
    }
    PyErr_Format(PyExc_TypeError, "expected str or bytes, got %.100s", Py_TYPE(text)->tp_name);
    return NULL;
}

/* What the encoders and decoders are bound to (held in a capsule that is
 * their `self`): a vocabulary, a pattern (encoders: a built-in TKI_PATTERN_*,
 * 0 for none, or a compiled custom pattern, which then splits), the special tokens whose
 * text the *_unless_special encoders refuse (or NULL), those that the batch
 * of special_batch_encoder encodes as their ids (or NULL), the Python object
 * that keeps them alive, and (encode_ordinary) the function that takes what
 * the C path does not (or NULL). */
typedef struct binding {
    const tki_vocab *vocab;
    int32_t pattern;
    const tki_pattern *compiled; /* not NULL: splits instead of `pattern` (then 0) */
    const tki_special_matcher *refused;
    const tki_special_matcher *allowed;
    PyObject *owner;
    PyObject *fallback;
} binding;

static void binding_free(PyObject *capsule)
{
    binding *bound = PyCapsule_GetPointer(capsule, BINDING_CAPSULE);
    if (bound == NULL) return;
    Py_XDECREF(bound->owner);
    Py_XDECREF(bound->fallback);
    PyMem_Free(bound);
}

static const binding *binding_of(PyObject *capsule)
{
    return PyCapsule_GetPointer(capsule, BINDING_CAPSULE);
}

/* A tuple of the `count` functions of `methods`, all bound to one new binding
 * (which keeps `owner` and `fallback`, if not NULL, alive); NULL with an
 * exception set. */
static PyObject *bound_functions(const tki_vocab *vocab, int32_t pattern, const tki_pattern *compiled,
                                 const tki_special_matcher *refused, const tki_special_matcher *allowed,
                                 PyObject *owner, PyObject *fallback, PyMethodDef *methods, Py_ssize_t count)
{
    binding *bound = PyMem_Malloc(sizeof *bound);
    if (bound == NULL) return PyErr_NoMemory();
    bound->vocab = vocab;
    bound->pattern = pattern;
    bound->compiled = compiled;
    bound->refused = refused;
    bound->allowed = allowed;
    Py_INCREF(owner);
    bound->owner = owner;
    Py_XINCREF(fallback);
    bound->fallback = fallback;
    PyObject *capsule = PyCapsule_New(bound, BINDING_CAPSULE, binding_free);
    if (capsule == NULL) {
        Py_DECREF(owner);
        Py_XDECREF(fallback);
        PyMem_Free(bound);
        return NULL;
    }
    PyObject *functions = PyTuple_New(count);
    for (Py_ssize_t i = 0; functions != NULL && i < count; i++) {
        PyObject *function = PyCFunction_New(&methods[i], capsule);
        if (function == NULL) {
            Py_CLEAR(functions);
            break;
        }
        PyTuple_SET_ITEM(functions, i, function);
    }
    Py_DECREF(capsule);
    return functions;
}

/* The one function of `method`, bound as by bound_functions; NULL with an
 * exception set. */
static PyObject *bound_function(const tki_vocab *vocab, int32_t pattern, const tki_pattern *compiled,
                                const tki_special_matcher *refused, const tki_special_matcher *allowed,
                                PyObject *owner, PyObject *fallback, PyMethodDef *method)
{
    PyObject *functions = bound_functions(vocab, pattern, compiled, refused, allowed, owner, fallback, method, 1);
    if (functions == NULL) return NULL;
    PyObject *function = PyTuple_GET_ITEM(functions, 0);
    Py_INCREF(function);
    Py_DECREF(functions);
    return function;
}

/* Whether data[0..length) holds a string of `refused` (NULL: none): 1 or 0, or
 * minus a tki_status.  Needs no GIL. */
static int32_t holds_string(const tki_special_matcher *refused, const char *data, Py_ssize_t length)
{
    if (refused == NULL) return 0;
    size_t start = 0, found = 0;
    uint32_t string = 0;
    int32_t status =
        tki_special_matcher_find(refused, (const uint8_t *)data, (size_t)length, 0, &start, &string, 1, &found);
    return status != TKI_OK ? -status : found > 0;
}

/* Whether data[0..length) holds the text of a refused special token: 1 or 0,
 * or -1 with an exception set. */
static int holds_refused(const binding *bound, const char *data, Py_ssize_t length)
{
    int32_t holds = holds_string(bound->refused, data, length);
    if (holds < 0) {
        raise_status(-holds);
        return -1;
    }
    return holds;
}

/*
 * encode of data[0..length) into ids[0..capacity) (*count of them): the
 * strings of `allowed` (NULL: none) as their ids, the text between them split
 * by `compiled` if not NULL, else by `pattern` (0: each stretch one piece).
 * The one choice of C entry point for every binding.  Needs no GIL.
 */
static int32_t encode_with(const tki_vocab *vocab, int32_t pattern, const tki_pattern *compiled,
                           const tki_special_matcher *allowed, const uint8_t *data, size_t length, uint32_t *ids,
                           size_t capacity, size_t *count)
{
    size_t last_piece_tokens = 0;
    if (compiled != NULL) {
        return tki_pattern_encode_with_specials(vocab, compiled, allowed, data, length, 0, ids, capacity, count,
                                                &last_piece_tokens);
    }
    if (allowed == NULL && pattern != 0) {
        return tki_encode_text(vocab, pattern, data, length, 0, ids, capacity, count, &last_piece_tokens);
    }
    return tki_encode_with_specials(vocab, pattern, allowed, data, length, 0, ids, capacity, count,
                                    &last_piece_tokens);
}

/* encode_ordinary of data[0..length) into ids[0..capacity) with the binding's
 * pattern: the number of ids, or minus a tki_status.  Needs no GIL. */
static int64_t encode_ids(const binding *bound, const uint8_t *data, size_t length, uint32_t *ids, size_t capacity)
{
    size_t count = 0;
    int32_t status = encode_with(bound->vocab, bound->pattern, bound->compiled, NULL, data, length, ids, capacity,
                                 &count);
    return status == TKI_OK ? (int64_t)count : -(int64_t)status;
}

/*
 * One-shot scratch: the ids array of a long one-shot call, kept for this
 * thread's next one.  A fresh array of 4 bytes per byte of text for every
 * call came from mmap once it was large (glibc's threshold moves with what
 * the process freed last), and each call then paid a page fault per 4 KiB of
 * ids it wrote, the same call taking 2.7 ms or 5.6 ms on 4 MiB of text from
 * one process to the next.
 *
 * The array lives in a capsule in the thread state's dict (freed with the
 * thread, and a forked child has its own copy), so threads never share one.
 * A call takes the array out of the capsule and puts it back when its ids are
 * read: a call that runs inside it on the same thread (a finalizer run by the
 * garbage collector while the list is made, or a signal handler) finds none
 * and allocates its own, so it cannot change the ids of the call it
 * interrupted.  A text under 32 KiB (fewer than SCRATCH_MIN_IDS ids) gets a
 * fresh array as before: malloc serves that from its heap without faults, for
 * less than the look-up costs.  Bounded: an array is kept only up to
 * SCRATCH_KEEP_IDS, and one more than four times what recent calls needed (a
 * need that decays by 1/16 a call) is freed instead of put back.
 */
#define SCRATCH_MIN_IDS ((size_t)1 << 15)    /* 128 KiB: glibc's least mmap threshold */
#define SCRATCH_KEEP_IDS ((size_t)4 << 20)   /* 16 MiB: the ids of a 4 MiB text       */
#define SCRATCH_GRAIN_IDS ((size_t)1 << 16)  /* arrays grow in steps of 256 KiB       */
#define SCRATCH_CAPSULE "tiktoken_inc._tki.one_shot_scratch"

/* Its key in the thread state's dict: an interned str made once at install. */
static PyObject *scratch_key;

typedef struct one_shot_scratch {
    uint32_t *ids;      /* NULL: none kept (or a call has it)              */
    size_t capacity;    /* its ids                                         */
    size_t recent;      /* what recent calls needed, decaying              */
    uint32_t *feed_ids; /* FEED_SCRATCH_IDS ids for stream calls, or NULL  */
} one_shot_scratch;

static void one_shot_scratch_free(PyObject *capsule)
{
    one_shot_scratch *scratch = PyCapsule_GetPointer(capsule, SCRATCH_CAPSULE);
    if (scratch == NULL) return;
    PyMem_RawFree(scratch->ids);
    PyMem_RawFree(scratch->feed_ids);
    PyMem_RawFree(scratch);
}

/* This thread's scratch (made on first use): a new reference, or NULL with an
 * exception set.  Needs the GIL. */
static PyObject *thread_scratch(void)
{
    PyObject *dict = PyThreadState_GetDict();
    if (dict == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "no thread state dict for the one-shot scratch");
        return NULL;
    }
    PyObject *capsule = PyDict_GetItemWithError(dict, scratch_key); /* (borrowed) */
    if (capsule == NULL && PyErr_Occurred()) return NULL;
    if (capsule != NULL) {
        Py_INCREF(capsule);
        return capsule; /* (only this file writes the key) */
    }
    one_shot_scratch *scratch = PyMem_RawCalloc(1, sizeof(*scratch));
    if (scratch == NULL) return PyErr_NoMemory();
    capsule = PyCapsule_New(scratch, SCRATCH_CAPSULE, one_shot_scratch_free);
    if (capsule == NULL) {
        PyMem_RawFree(scratch);
        return NULL;
    }
    if (PyDict_SetItem(dict, scratch_key, capsule) != 0) {
        Py_DECREF(capsule);
        return NULL;
    }
    return capsule;
}

/* This thread's scratch, and in *owner a new reference to its capsule (to release once the
 * call gives back what it took); NULL in both with an exception set.  Needs the GIL. */
static one_shot_scratch *owned_thread_scratch(PyObject **owner)
{
    *owner = thread_scratch();
    if (*owner == NULL) return NULL;
    one_shot_scratch *scratch = PyCapsule_GetPointer(*owner, SCRATCH_CAPSULE);
    if (scratch == NULL) Py_CLEAR(*owner);
    return scratch;
}

/*
 * An array of at least `needed` ids for one call (needed > STACK_IDS): this
 * thread's kept array, taken out of *owner (a new reference to its capsule,
 * for scratch_give_back), or a new one; *capacity: its size in ids.  NULL
 * with an exception set on failure.  Needs the GIL.
 */
static uint32_t *scratch_take(size_t needed, PyObject **owner, size_t *capacity)
{
    *owner = NULL;
    if (needed > SIZE_MAX / sizeof(uint32_t) - SCRATCH_GRAIN_IDS) return (uint32_t *)PyErr_NoMemory();
    size_t size = (needed + SCRATCH_GRAIN_IDS - 1) / SCRATCH_GRAIN_IDS * SCRATCH_GRAIN_IDS;
    if (needed < SCRATCH_MIN_IDS) {
        size = needed; /* (malloc's own heap serves it without faults) */
    } else if (needed <= SCRATCH_KEEP_IDS) {
        one_shot_scratch *scratch = owned_thread_scratch(owner);
        if (scratch == NULL) return NULL;
        scratch->recent = needed > scratch->recent ? needed : scratch->recent - scratch->recent / 16;
        if (scratch->ids != NULL && scratch->capacity >= needed) {
            uint32_t *ids = scratch->ids;
            *capacity = scratch->capacity;
            scratch->ids = NULL; /* taken: a call inside this one makes its own */
            scratch->capacity = 0;
            return ids;
        }
        PyMem_RawFree(scratch->ids); /* too small: replaced */
        scratch->ids = NULL;
        scratch->capacity = 0;
        if (size > SCRATCH_KEEP_IDS) size = SCRATCH_KEEP_IDS;
    } else {
        size = needed;
    }
    uint32_t *ids = PyMem_RawMalloc(size * sizeof(uint32_t));
    if (ids == NULL) {
        Py_CLEAR(*owner); /* (what it kept, it keeps) */
        return (uint32_t *)PyErr_NoMemory();
    }
    advise_huge_pages(ids, size * sizeof(uint32_t));
    *capacity = size;
    return ids;
}

/* Puts back (or frees) what scratch_take gave; releases `owner`.  Needs the GIL. */
static void scratch_give_back(PyObject *owner, uint32_t *ids, size_t capacity)
{
    one_shot_scratch *scratch = owner != NULL ? PyCapsule_GetPointer(owner, SCRATCH_CAPSULE) : NULL;
    if (scratch != NULL && scratch->ids == NULL && capacity <= SCRATCH_KEEP_IDS &&
        capacity / 4 <= scratch->recent) {
        scratch->ids = ids;
        scratch->capacity = capacity;
    } else {
        PyMem_RawFree(ids); /* too large, or a call inside this one kept its own */
    }
    Py_XDECREF(owner);
}

/*
 * The ids array of a stream call (a feed of a few KiB: at most FEED_SCRATCH_IDS
 * ids, more than fit on the stack), kept for this thread's next one, as the
 * one-shot array is and with the same protocol: taken out of the capsule for
 * the call (a call inside it on the same thread makes its own), put back
 * after.  A stream fed 4 KiB at a time paid malloc and free of 16 KiB a feed,
 * and wrote its ids to memory the cache had lost.  The array is the thread's,
 * not the stream's: kept by each stream it was 32 KiB more for every stream
 * fed once a few KiB, as long as the stream lived (2,000 such streams held
 * 37 KB each, against 4 KB).
 */
#define FEED_SCRATCH_IDS ((size_t)8192)

/* This thread's feed array, taken out of *owner (a new reference to its
 * capsule, for feed_scratch_give_back), or a new one if a call has it.  NULL
 * with an exception set.  Needs the GIL. */
static uint32_t *feed_scratch_take(PyObject **owner)
{
    one_shot_scratch *scratch = owned_thread_scratch(owner);
    if (scratch == NULL) return NULL;
    uint32_t *ids = scratch->feed_ids;
    scratch->feed_ids = NULL; /* taken: a call inside this one makes its own */
    if (ids == NULL && (ids = PyMem_RawMalloc(FEED_SCRATCH_IDS * sizeof(uint32_t))) == NULL) {
        Py_CLEAR(*owner);
        PyErr_NoMemory();
    }
    return ids;
}

/* Puts back (or frees) what feed_scratch_take gave; releases `owner`.  Needs the GIL. */
static void feed_scratch_give_back(PyObject *owner, uint32_t *ids)
{
    one_shot_scratch *scratch = owner != NULL ? PyCapsule_GetPointer(owner, SCRATCH_CAPSULE) : NULL;
    if (scratch != NULL && scratch->feed_ids == NULL) {
        scratch->feed_ids = ids;
    } else {
        PyMem_RawFree(ids); /* a call inside this one kept its own */
    }
    Py_XDECREF(owner);
}

/* scratch_bytes() -> int: the bytes of one-shot scratch this thread keeps. */
static PyObject *module_scratch_bytes(PyObject *module, PyObject *unused)
{
    (void)module;
    (void)unused;
    PyObject *dict = PyThreadState_GetDict();
    PyObject *capsule = dict != NULL ? PyDict_GetItemWithError(dict, scratch_key) : NULL;
    if (capsule == NULL && PyErr_Occurred()) return NULL;
    one_shot_scratch *scratch = capsule != NULL && PyCapsule_IsValid(capsule, SCRATCH_CAPSULE)
                                    ? PyCapsule_GetPointer(capsule, SCRATCH_CAPSULE)
                                    : NULL;
    return PyLong_FromSize_t(scratch != NULL && scratch->ids != NULL ? scratch->capacity * sizeof(uint32_t) : 0);
}

/* The ids of data[0..length) as a new list. */
static PyObject *encode_utf8(const binding *bound, const char *data, Py_ssize_t length)
{
    uint32_t stack_ids[STACK_IDS];
    uint32_t *ids = stack_ids;
    size_t capacity = STACK_IDS;
    PyObject *owner = NULL;
    if ((size_t)length > STACK_IDS) {
        ids = scratch_take((size_t)length, &owner, &capacity);
        if (ids == NULL) return NULL;
    }
    int64_t count;
    if (length >= GIL_FREE_MIN_BYTES) {
        Py_BEGIN_ALLOW_THREADS
        count = encode_ids(bound, (const uint8_t *)data, (size_t)length, ids, capacity);
        Py_END_ALLOW_THREADS
    } else {
        count = encode_ids(bound, (const uint8_t *)data, (size_t)length, ids, capacity);
    }
    PyObject *result = count < 0 ? raise_status((int32_t)-count) : list_of_ids(ids, (size_t)count);
    if (ids != stack_ids) scratch_give_back(owner, ids, capacity);
    return result;
}

/* encode(text) -> list[int]: encode_ordinary of a str (or of UTF-8 bytes). */
static PyObject *encoder_encode(PyObject *capsule, PyObject *text)
{
    const binding *bound = binding_of(capsule);
    if (bound == NULL) return NULL;
    Py_ssize_t length = 0;
    const char *data = utf8_of(text, &length);
    if (data == NULL) return NULL;
    return encode_utf8(bound, data, length);
}

/* encode_ordinary(text) -> list[int]: the ids of a str; anything else (not a
 * str, or a str with lone surrogates) goes to the binding's fallback, which
 * says what tiktoken would.  Bound as Encoding.encode_ordinary itself, so that
 * the commonest call is one C call with no Python frame. */
static PyObject *encoder_encode_ordinary(PyObject *capsule, PyObject *text)
{
    const binding *bound = binding_of(capsule);
    if (bound == NULL) return NULL;
    if (PyUnicode_Check(text)) {
        const char *data = NULL;
        Py_ssize_t length = 0;
        int kept = kept_utf8(text, &data, &length);
        if (kept > 0) return encode_utf8(bound, data, length);
        if (kept < 0) return NULL;
    }
    if (bound->fallback == NULL) {
        PyErr_Format(PyExc_TypeError, "expected a str without lone surrogates, got %.100s", Py_TYPE(text)->tp_name);
        return NULL;
    }
    return PyObject_CallOneArg(bound->fallback, text);
}

static PyMethodDef ordinary_encoder_method[] = {
    {"encode_ordinary", encoder_encode_ordinary, METH_O,
     "Encodes a string into tokens, ignoring special tokens (Encoding.encode_ordinary)."},
};

/*
 * A method that calls what its instance holds: Encoding.encode_ordinary as
 * the class keeps it.  The method's work is one call, `self._ordinary_encoder(
 * text)` (the C function above, bound per Encoding), and a Python frame to
 * make that call cost about 550 instructions: a third of encoding "hello", 4%
 * of an English paragraph.  This object calls the held function from C: a
 * method descriptor (Python calls it with the instance first, making no bound
 * method), standing for the Python function it wraps everywhere else:
 *   - any call but (instance, text), e.g. a keyword, goes to that function;
 *   - `__wrapped__` is that function (inspect.signature reads it there), and
 *     its other attributes (__doc__, __name__, __qualname__, ...) are its;
 *   - on an instance it is a bound method; on the class, itself.
 * The class attribute stays a class attribute: mock.patch.object on the class
 * or the instance, and a subclass's override, work as on the function.
 *
 * Encoding.encode is one with a fallback (made with a third argument, None):
 * its instance holds the default call's C function (encode_unless_special,
 * bound per Encoding), and a call with no argument but the text goes to it;
 * once its special_tokens_set (a plain set that may change) is out, it holds
 * (function, that set, its size), the function held while the set keeps that
 * size.  None held (or a set of another size), or None returned
 * (special-token text, lone surrogates, no str), and the call is the Python
 * method's, which says what to do.
 *
 * Encoding.count_tokens is one with a fallback and a limit keyword (made
 * with a fourth argument, "limit"): a call (instance, text, limit=L) is held
 * as well, the held counter called with (text, L), and its count above an
 * int L answered None, as the method answers a count over its limit (the
 * counter gives L + 1 then, and None for what it declines: a limit that is no
 * int >= 0 among them).  A gateway's count with a limit was the method's frame
 * and its checks, about three times the C call on a short text.
 *
 * StreamEncoder.feed is one too, with a fallback (made with a third argument,
 * the name of the instance's failure hook): its instance holds the stream's C
 * feed while every chunk can go straight to it, else None.  None held, or None
 * returned (the C feed declines: a str with lone surrogates, a stream that has
 * failed), and the call is the Python method's, which takes every case; an
 * exception of the C feed other than RuntimeError (another thread's call has
 * the stream: this one changed nothing) is first handed to the hook, which
 * marks the encoder failed, as the method's own `except` clause does.  On 4 KiB
 * feeds of the fastest runs the method's frame was a tenth of the time.
 */
typedef struct held_method {
    PyObject_HEAD
    PyObject *function;  /* the Python method it stands for              */
    PyObject *attribute; /* the instance's attribute it calls, a str     */
    PyObject *failure;   /* the instance's failure hook, a str; or NULL: none */
    PyObject *limit_keyword; /* a keyword also held (passed on, see above), a str; or NULL */
    int declines;        /* None held or returned: the method's call (else returned as is) */
    vectorcallfunc vectorcall;
} held_method;

static PyObject *stream_feed(PyObject *capsule, PyObject *const *args, Py_ssize_t nargs);

/* Hands the exception being raised to `instance`'s hook `failure` (a RuntimeError
 * aside), raising it still; NULL. */
static PyObject *note_failure(PyObject *instance, PyObject *failure)
{
    if (PyErr_ExceptionMatches(PyExc_RuntimeError)) return NULL;
    PyObject *type = NULL, *value = NULL, *traceback = NULL;
    PyErr_Fetch(&type, &value, &traceback);
    PyErr_NormalizeException(&type, &value, &traceback);
    if (value == NULL) { /* (a normalization that failed leaves its own error) */
        Py_XDECREF(type);
        Py_XDECREF(traceback);
        return NULL;
    }
    if (traceback != NULL) PyException_SetTraceback(value, traceback);
    PyObject *noted = PyObject_CallMethodOneArg(instance, failure, value);
    if (noted == NULL) { /* the hook's own error wins, chained to the first */
        Py_XDECREF(type);
        Py_XDECREF(traceback);
        PyObject *hook_type = NULL, *hook_value = NULL, *hook_traceback = NULL;
        PyErr_Fetch(&hook_type, &hook_value, &hook_traceback);
        PyErr_NormalizeException(&hook_type, &hook_value, &hook_traceback);
        if (hook_value != NULL) PyException_SetContext(hook_value, value); /* (steals value) */
        else Py_DECREF(value);
        PyErr_Restore(hook_type, hook_value, hook_traceback);
        return NULL;
    }
    Py_DECREF(noted);
    PyErr_Restore(type, value, traceback);
    return NULL;
}

static PyObject *held_method_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    held_method *method = (held_method *)callable;
    PyObject *limit = NULL; /* the limit keyword's value, when the call has it alone */
    if (kwnames != NULL && method->limit_keyword != NULL && PyVectorcall_NARGS(nargsf) == 2 &&
        PyTuple_GET_SIZE(kwnames) == 1) {
        PyObject *name = PyTuple_GET_ITEM(kwnames, 0); /* (a str: CPython checks keyword names) */
        if (name == method->limit_keyword || PyUnicode_Compare(name, method->limit_keyword) == 0) limit = args[2];
    }
    if ((kwnames == NULL || limit != NULL) && PyVectorcall_NARGS(nargsf) == 2) {
        PyObject *held = PyObject_GetAttr(args[0], method->attribute);
        if (held != NULL) {
            PyObject *result, *callee = held;
            if (method->declines && PyTuple_CheckExact(held) && PyTuple_GET_SIZE(held) == 3) {
                /* (function, watched, size): function while the set `watched` has that size */
                PyObject *watched = PyTuple_GET_ITEM(held, 1);
                Py_ssize_t size = PyLong_AsSsize_t(PyTuple_GET_ITEM(held, 2));
                if (size == -1 && PyErr_Occurred()) {
                    Py_DECREF(held);
                    return NULL;
                }
                callee = PyAnySet_Check(watched) && PySet_GET_SIZE(watched) == size ? PyTuple_GET_ITEM(held, 0) : Py_None;
            }
            if (method->declines && callee == Py_None) {
                Py_DECREF(held);
                return PyObject_Vectorcall(method->function, args, nargsf, kwnames);
            }
            if (limit != NULL) {
                result = PyObject_Vectorcall(callee, &args[1], 2, NULL); /* (text, limit) */
                if (result != NULL && PyLong_CheckExact(result) && PyLong_CheckExact(limit)) {
                    int over = PyObject_RichCompareBool(result, limit, Py_GT);
                    if (over != 0) {
                        Py_DECREF(result);
                        Py_DECREF(held);
                        if (over < 0) return NULL;
                        Py_RETURN_NONE; /* more than limit: the answer, not a decline */
                    }
                }
            } else if (PyCFunction_Check(callee) && PyCFunction_GET_FUNCTION(callee) == encoder_encode_ordinary) {
                result = encoder_encode_ordinary(PyCFunction_GET_SELF(callee), args[1]);
            } else if (PyCFunction_Check(callee) && PyCFunction_GET_FUNCTION(callee) == (PyCFunction)(void (*)(void))stream_feed) {
                result = stream_feed(PyCFunction_GET_SELF(callee), &args[1], 1);
            } else {
                result = PyObject_CallOneArg(callee, args[1]);
            }
            Py_DECREF(held); /* (callee: held itself, or an item of it) */
            if (!method->declines) return result;
            if (result == NULL) return method->failure != NULL ? note_failure(args[0], method->failure) : NULL;
            if (result != Py_None) return result;
            Py_DECREF(result); /* declined: the method takes it */
            return PyObject_Vectorcall(method->function, args, nargsf, kwnames);
        }
        if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return NULL;
        PyErr_Clear(); /* (the function says what is missing) */
    }
    return PyObject_Vectorcall(method->function, args, nargsf, kwnames);
}

static PyObject *held_method_get(PyObject *self, PyObject *instance, PyObject *type)
{
    (void)type;
    if (instance == NULL || instance == Py_None) {
        Py_INCREF(self);
        return self;
    }
    return PyMethod_New(self, instance);
}

/* The function's attributes, for those this type does not have itself. */
static PyObject *held_method_getattro(PyObject *self, PyObject *name)
{
    PyObject *value = PyObject_GenericGetAttr(self, name);
    if (value != NULL || !PyErr_ExceptionMatches(PyExc_AttributeError)) return value;
    PyErr_Clear();
    return PyObject_GetAttr(((held_method *)self)->function, name);
}

static PyObject *held_method_doc(PyObject *self, void *closure)
{
    (void)closure;
    return PyObject_GetAttrString(((held_method *)self)->function, "__doc__");
}

static PyObject *held_method_repr(PyObject *self)
{
    return PyObject_Repr(((held_method *)self)->function);
}

static int held_method_traverse(PyObject *self, visitproc visit, void *arg)
{
    Py_VISIT(((held_method *)self)->function);
    return 0;
}

static int held_method_clear(PyObject *self)
{
    Py_CLEAR(((held_method *)self)->function);
    return 0;
}

static void held_method_dealloc(PyObject *self)
{
    PyObject_GC_UnTrack(self);
    held_method_clear(self);
    Py_CLEAR(((held_method *)self)->attribute);
    Py_CLEAR(((held_method *)self)->failure);
    Py_CLEAR(((held_method *)self)->limit_keyword);
    PyObject_GC_Del(self);
}

static PyMemberDef held_method_members[] = {
    {"__wrapped__", T_OBJECT, offsetof(held_method, function), READONLY, "the method it stands for"},
    {NULL, 0, 0, 0, NULL},
};

static PyGetSetDef held_method_getset[] = {
    {"__doc__", held_method_doc, NULL, "the method's docstring", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject held_method_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "tiktoken_inc._tki.held_method",
    .tp_basicsize = sizeof(held_method),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_METHOD_DESCRIPTOR | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_vectorcall_offset = offsetof(held_method, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_descr_get = held_method_get,
    .tp_getattro = held_method_getattro,
    .tp_repr = held_method_repr,
    .tp_traverse = held_method_traverse,
    .tp_clear = held_method_clear,
    .tp_dealloc = held_method_dealloc,
    .tp_members = held_method_members,
    .tp_getset = held_method_getset,
};

/* held_method(function, attribute[, failure[, limit_keyword]]) -> a method
 * standing for `function` whose call (instance, text) is `getattr(instance,
 * attribute)(text)`; with `failure`, one that falls back to `function`; with
 * `limit_keyword`, one that holds that keyword too (above). */
static PyObject *module_held_method(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs < 2 || nargs > 4 || !PyCallable_Check(args[0]) || !PyUnicode_Check(args[1]) ||
        (nargs >= 3 && !PyUnicode_Check(args[2]) && args[2] != Py_None) || (nargs == 4 && !PyUnicode_Check(args[3]))) {
        PyErr_SetString(PyExc_TypeError,
                        "held_method(function, attribute: str[, failure: str | None[, limit_keyword: str]])");
        return NULL;
    }
    if (PyType_Ready(&held_method_type) != 0) return NULL;
    held_method *method = PyObject_GC_New(held_method, &held_method_type);
    if (method == NULL) return NULL;
    Py_INCREF(args[0]);
    Py_INCREF(args[1]);
    method->function = args[0];
    method->attribute = args[1];
    PyUnicode_InternInPlace(&method->attribute);
    method->failure = NULL;
    method->limit_keyword = NULL;
    method->declines = nargs >= 3; /* a third argument, even None: None declines */
    if (nargs == 3 && args[2] != Py_None) {
        Py_INCREF(args[2]);
        method->failure = args[2];
        PyUnicode_InternInPlace(&method->failure);
    }
    if (nargs == 4) {
        Py_INCREF(args[3]);
        method->limit_keyword = args[3];
        PyUnicode_InternInPlace(&method->limit_keyword);
    }
    method->vectorcall = held_method_vectorcall;
    PyObject_GC_Track(method);
    return (PyObject *)method;
}

/* encode_unless_special(text) -> list[int] | None: encode_ordinary of a str
 * that holds none of the refused special tokens' text; None if it holds one,
 * or has lone surrogates (the caller's full path then says what to do). */
static PyObject *encoder_encode_unless_special(PyObject *capsule, PyObject *text)
{
    const binding *bound = binding_of(capsule);
    if (bound == NULL) return NULL;
    if (!PyUnicode_Check(text)) Py_RETURN_NONE;
    const char *data = NULL;
    Py_ssize_t length = 0;
    int kept = kept_utf8(text, &data, &length);
    if (kept <= 0) {
        if (kept < 0) return NULL;
        Py_RETURN_NONE;
    }
    int refused = holds_refused(bound, data, length);
    if (refused != 0) {
        if (refused < 0) return NULL;
        Py_RETURN_NONE;
    }
    return encode_utf8(bound, data, length);
}

static PyObject *module_utf8_replacing_surrogates(PyObject *module, PyObject *text);

/* The UTF-8 of a str's characters, made without the GIL. */
#include "_tki_str_utf8.c"

/* Batches on several threads: lists and flat arrays. */
#include "_tki_batch.c"

/* The thread count of encode_many(texts[, threads]) (1 when not given): 0, or
 * -1 with an exception set. */
static int batch_arguments(PyObject *const *args, Py_ssize_t nargs, const char *name, Py_ssize_t *threads)
{
    *threads = 1;
    if (nargs < 1 || nargs > 2) {
        PyErr_Format(PyExc_TypeError, "%s(texts, threads=1)", name);
        return -1;
    }
    if (nargs == 2 && (*threads = PyLong_AsSsize_t(args[1])) == -1 && PyErr_Occurred()) return -1;
    return 0;
}

/* encode_many(texts, threads=1) -> list[list[int]]: encode_ordinary of each
 * str of a sequence, on up to `threads` threads without the GIL. */
static PyObject *encoder_encode_many(PyObject *capsule, PyObject *const *args, Py_ssize_t nargs)
{
    const binding *bound = binding_of(capsule);
    Py_ssize_t threads = 1;
    if (bound == NULL || batch_arguments(args, nargs, "encode_many", &threads) != 0) return NULL;
    return encode_many(bound, args[0], threads, BATCH_LISTS);
}

/* encode_many_with_specials(texts, threads=1) -> list[list[int] | None]:
 * encode of each str with the bound special tokens allowed; None for an item
 * it does not take (see encode_many). */
static PyObject *encoder_encode_many_with_specials(PyObject *capsule, PyObject *const *args, Py_ssize_t nargs)
{
    const binding *bound = binding_of(capsule);
    Py_ssize_t threads = 1;
    if (bound == NULL || batch_arguments(args, nargs, "encode_many_with_specials", &threads) != 0) return NULL;
    return encode_many(bound, args[0], threads, BATCH_LISTS_OR_NONE);
}

static PyMethodDef encoder_methods[] = {
    {"encode", encoder_encode, METH_O, "encode_ordinary of one str: a list of ids"},
    {"encode_many", (PyCFunction)(void (*)(void))encoder_encode_many, METH_FASTCALL,
     "encode_ordinary of each str of a sequence, on up to `threads` threads"},
    {"encode_unless_special", encoder_encode_unless_special, METH_O,
     "encode_ordinary of a str without refused special-token text, else None"},
};

/* The tki_vocab at address args[0] and the pattern args[1] of the module
 * function `name`: a built-in TKI_PATTERN_*, or from `lowest` (0: no pre-split,
 * for the flat batch, whose items then call tki_encode_with_specials); and
 * *compiled, when the function was given one argument more than its `usual`
 * (args[usual], the address of a tki_pattern that splits instead: pattern 0),
 * else NULL.  0, or -1 with an exception set. */
static int vocab_and_pattern(PyObject *const *args, Py_ssize_t nargs, Py_ssize_t usual, const char *name,
                             long lowest, void **vocab, int32_t *pattern, const tki_pattern **compiled)
{
    *compiled = NULL;
    *vocab = PyLong_AsVoidPtr(args[0]);
    long value = PyLong_AsLong(args[1]);
    if (nargs == usual + 1) *compiled = PyLong_AsVoidPtr(args[usual]);
    if (PyErr_Occurred()) return -1;
    if (*compiled != NULL ? value != 0 : value < lowest || value > TKI_PATTERN_O200K) {
        PyErr_Format(PyExc_ValueError, "%s: not a built-in pattern (or 0 with a compiled one)", name);
        return -1;
    }
    if (*vocab == NULL) {
        PyErr_Format(PyExc_ValueError, "%s: no vocabulary", name);
        return -1;
    }
    *pattern = (int32_t)value;
    return 0;
}

/* encoders(vocab_address, pattern, refused_address, owner) -> (encode,
 * encode_many, encode_unless_special), bound to the tki_vocab at vocab_address,
 * a TKI_PATTERN_* and the tki_special_matcher at refused_address (0: none),
 * all kept alive by `owner`. */
static PyObject *module_encoders(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 4 && nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "encoders(vocab_address, pattern, refused_address, owner[, compiled_address])");
        return NULL;
    }
    void *vocab = NULL;
    int32_t pattern = 0;
    const tki_pattern *compiled = NULL;
    if (vocab_and_pattern(args, nargs, 4, "encoders", TKI_PATTERN_R50K, &vocab, &pattern, &compiled) != 0) {
        return NULL;
    }
    void *refused = PyLong_AsVoidPtr(args[2]);
    if (PyErr_Occurred()) return NULL;
    return bound_functions(vocab, pattern, compiled, refused, NULL, args[3], NULL, encoder_methods, 3);
}

static PyMethodDef special_batch_method[] = {
    {"encode_many_with_specials", (PyCFunction)(void (*)(void))encoder_encode_many_with_specials, METH_FASTCALL,
     "encode of each str of a sequence with the bound special tokens allowed, None for one holding refused text, "
     "on up to `threads` threads"},
};

/* special_batch_encoder(vocab_address, pattern, refused_address, allowed_address,
 * owner) -> encode_many_with_specials(texts, threads=1): the encode of each
 * text, refusing (None) a text that holds a token of the tki_special_matcher
 * at refused_address (0: none) and encoding the special tokens of the matcher
 * at allowed_address (0: none) as their ids, as `encode` with those allowed
 * does; all kept alive by `owner`. */
/* The function of `method` bound to (vocab_address, pattern, refused_address,
 * allowed_address, owner) = args[0..5), as the module function `name` takes
 * them (patterns from `lowest`): special_batch_encoder and flat_encoder. */
static PyObject *batch_function(PyObject *const *args, Py_ssize_t nargs, const char *name, long lowest,
                                PyMethodDef *method)
{
    if (nargs != 5 && nargs != 6) {
        PyErr_Format(PyExc_TypeError, "%s(vocab_address, pattern, refused_address, allowed_address, owner[, compiled_address])", name);
        return NULL;
    }
    void *vocab = NULL;
    int32_t pattern = 0;
    const tki_pattern *compiled = NULL;
    if (vocab_and_pattern(args, nargs, 5, name, lowest, &vocab, &pattern, &compiled) != 0) return NULL;
    void *refused = PyLong_AsVoidPtr(args[2]);
    void *allowed = PyLong_AsVoidPtr(args[3]);
    if (PyErr_Occurred()) return NULL;
    return bound_function(vocab, pattern, compiled, refused, allowed, args[4], NULL, method);
}

static PyObject *module_special_batch_encoder(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    return batch_function(args, nargs, "special_batch_encoder", TKI_PATTERN_R50K, special_batch_method);
}

/* encode_flat(texts, threads, lines, eot, id_bytes, accept_bytes,
 * first_offset) -> (ids, offsets, problem): the ids of every document of the
 * texts in one bytearray of native uint32 (uint16 with id_bytes 2) and their
 * int64 offsets, from first_offset, in another, encoded as the binding says
 * (see encode_flat in _tki_batch.c). */
static PyObject *encoder_encode_flat(PyObject *capsule, PyObject *const *args, Py_ssize_t nargs)
{
    const binding *bound = binding_of(capsule);
    if (bound == NULL) return NULL;
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError,
                        "encode_flat(texts, threads, lines, eot, id_bytes, accept_bytes, first_offset)");
        return NULL;
    }
    const Py_ssize_t threads = PyLong_AsSsize_t(args[1]);
    const int lines = PyObject_IsTrue(args[2]);
    const long long eot = PyLong_AsLongLong(args[3]);
    const long id_bytes = PyLong_AsLong(args[4]);
    const int accept_bytes = PyObject_IsTrue(args[5]);
    const long long first_offset = PyLong_AsLongLong(args[6]);
    if (PyErr_Occurred() || lines < 0 || accept_bytes < 0) return NULL;
    if ((id_bytes != 2 && id_bytes != 4) || eot < -1 || eot > (long long)UINT32_MAX || first_offset < 0) {
        PyErr_SetString(PyExc_ValueError, "encode_flat: id_bytes must be 2 or 4, eot an id or -1, first_offset >= 0");
        return NULL;
    }
    return encode_flat(bound, args[0], threads, lines, (int64_t)eot, (size_t)id_bytes, accept_bytes,
                       (int64_t)first_offset);
}

static PyMethodDef flat_method[] = {
    {"encode_flat", (PyCFunction)(void (*)(void))encoder_encode_flat, METH_FASTCALL,
     "encode_flat(texts, threads, lines, eot, id_bytes, accept_bytes, first_offset) -> (ids, offsets, problem)"},
};

/* flat_encoder(vocab_address, pattern, refused_address, allowed_address, owner)
 * -> encode_flat, bound as special_batch_encoder's function is (both matchers
 * 0: encode_ordinary's ids). */
static PyObject *module_flat_encoder(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    return batch_function(args, nargs, "flat_encoder", 0, flat_method);
}

/* ordinary_encoder(vocab_address, pattern, owner, fallback) -> encode_ordinary,
 * bound to the tki_vocab at vocab_address and a TKI_PATTERN_*, kept alive by
 * `owner`; `fallback(text)` takes what it does not (encoder_encode_ordinary). */
static PyObject *module_ordinary_encoder(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 4 && nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "ordinary_encoder(vocab_address, pattern, owner, fallback[, compiled_address])");
        return NULL;
    }
    void *vocab = NULL;
    int32_t pattern = 0;
    const tki_pattern *compiled = NULL;
    if (vocab_and_pattern(args, nargs, 4, "ordinary_encoder", TKI_PATTERN_R50K, &vocab, &pattern, &compiled) != 0) {
        return NULL;
    }
    if (!PyCallable_Check(args[3])) {
        PyErr_SetString(PyExc_TypeError, "ordinary_encoder: the fallback is not callable");
        return NULL;
    }
    return bound_function(vocab, pattern, compiled, NULL, NULL, args[2], args[3], ordinary_encoder_method);
}

/* id_list(address, count) -> list[int]: the uint32 ids at address. */
static PyObject *module_id_list(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "id_list(address, count)");
        return NULL;
    }
    const uint32_t *ids = PyLong_AsVoidPtr(args[0]);
    Py_ssize_t count = PyLong_AsSsize_t(args[1]);
    if (PyErr_Occurred()) return NULL;
    if (count < 0 || (ids == NULL && count > 0)) {
        PyErr_SetString(PyExc_ValueError, "id_list: no ids at this address");
        return NULL;
    }
    return list_of_ids(ids, (size_t)count);
}

/* add_to_offsets(buffer, delta) -> None: adds delta >= 0 to each native int64
 * of a writable buffer, in place (the corpus command moves a group's offsets,
 * encoded from 0, to where its ids land in the whole output).  ValueError for
 * a buffer that is not whole int64s, OverflowError past INT64_MAX (the buffer
 * is then unchanged). */
static PyObject *module_add_to_offsets(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "add_to_offsets(buffer, delta)");
        return NULL;
    }
    const long long delta = PyLong_AsLongLong(args[1]);
    if (delta == -1 && PyErr_Occurred()) return NULL;
    if (delta < 0) {
        PyErr_SetString(PyExc_ValueError, "add_to_offsets: delta must be >= 0");
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) != 0) return NULL;
    PyObject *result = NULL;
    const size_t count = (size_t)view.len / sizeof(int64_t);
    if ((size_t)view.len % sizeof(int64_t) != 0) {
        PyErr_SetString(PyExc_ValueError, "add_to_offsets: the buffer is not a whole number of int64s");
        goto done;
    }
    int64_t largest = 0;
    for (size_t i = 0; i < count; i++) {
        int64_t value;
        memcpy(&value, (const char *)view.buf + i * sizeof value, sizeof value);
        if (value > largest) largest = value;
    }
    if (largest > INT64_MAX - (int64_t)delta) {
        PyErr_SetString(PyExc_OverflowError, "add_to_offsets: an offset would pass INT64_MAX");
        goto done;
    }
    for (size_t i = 0; i < count; i++) {
        int64_t value;
        memcpy(&value, (char *)view.buf + i * sizeof value, sizeof value);
        value += (int64_t)delta;
        memcpy((char *)view.buf + i * sizeof value, &value, sizeof value);
    }
    Py_INCREF(Py_None);
    result = Py_None;
done:
    PyBuffer_Release(&view);
    return result;
}

/*
 * Decoding.  A decoder is bound to a vocabulary (a capsule holding it, with the
 * Python object that keeps it alive).  It takes a list or tuple of ints and
 * returns None, not an error, for anything it does not take as it is (an item
 * that is not an int, out of range, or no token): the caller's general path
 * then gives tiktoken's exact error or conversion.
 */
#define STACK_BYTES 4096

/* The bytes of tokens (a list or tuple of ints) go to a buffer: `stack` when
 * they fit, else a new one (*out_heap, to free).  1: done; 0: not taken as it
 * is (see above); -1: an exception is set. */
/*
 * The ids of a list or tuple of exact ints into stack_ids (its STACK_IDS
 * entries) or a new array (*out_ids then differs from stack_ids: the caller
 * frees it); *out_count their number.  1: done; 0: some item is no int below
 * 2^32; -1: out of memory (the error set).  The items are read while the
 * sequence cannot change: a list is locked where the build has no GIL (a
 * free-threaded build: another thread may resize it, freeing the array of
 * items being read); elsewhere the GIL, which nothing here releases, is held.
 */
static int read_ids_locked(PyObject *tokens, uint32_t *stack_ids, uint32_t **out_ids,
                           Py_ssize_t *out_count)
{
    Py_ssize_t count = PySequence_Fast_GET_SIZE(tokens);
    PyObject **items = PySequence_Fast_ITEMS(tokens);
    uint32_t *ids = stack_ids;
    *out_ids = stack_ids;
    *out_count = count;
    if ((size_t)count > STACK_IDS) {
        ids = PyMem_RawMalloc((size_t)count * sizeof(uint32_t));
        if (ids == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        *out_ids = ids;
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        if (!PyLong_CheckExact(items[i])) return 0;
        unsigned long value = PyLong_AsUnsignedLong(items[i]);
        if (value == (unsigned long)-1 && PyErr_Occurred()) {
            PyErr_Clear();
            return 0;
        }
        if (value > UINT32_MAX) return 0;
        ids[i] = (uint32_t)value;
    }
    return 1;
}

static int read_ids(PyObject *tokens, uint32_t *stack_ids, uint32_t **out_ids, Py_ssize_t *out_count)
{
    int result;
#if defined(Py_BEGIN_CRITICAL_SECTION)
    Py_BEGIN_CRITICAL_SECTION(tokens);
    result = read_ids_locked(tokens, stack_ids, out_ids, out_count);
    Py_END_CRITICAL_SECTION();
#else
    result = read_ids_locked(tokens, stack_ids, out_ids, out_count);
#endif
    return result;
}

static int decode_to_buffer(const binding *bound, PyObject *tokens, uint8_t *stack,
                            size_t stack_size, uint8_t **out_bytes, size_t *out_len, uint8_t **out_heap)
{
    *out_heap = NULL;
    if (!PyList_CheckExact(tokens) && !PyTuple_CheckExact(tokens)) return 0;
    uint32_t stack_ids[STACK_IDS];
    uint32_t *ids = stack_ids;
    Py_ssize_t count = 0;
    int result = read_ids(tokens, stack_ids, &ids, &count);
    if (result != 1) goto done;
    result = 0;
    size_t length = 0, bad = 0;
    if (tki_decoded_length(bound->vocab, ids, (size_t)count, &length, &bad) != TKI_OK) goto done;
    uint8_t *bytes = stack;
    if (length > stack_size) {
        bytes = *out_heap = PyMem_RawMalloc(length);
        if (bytes == NULL) {
            PyErr_NoMemory();
            result = -1;
            goto done;
        }
    }
    if (tki_decode(bound->vocab, ids, (size_t)count, bytes, length, &length, &bad) != TKI_OK) {
        PyMem_RawFree(*out_heap);
        *out_heap = NULL;
        goto done;
    }
    *out_bytes = bytes;
    *out_len = length;
    result = 1;
done:
    if (ids != stack_ids) PyMem_RawFree(ids);
    return result;
}

/* The bytes of tokens as bytes, or (as_text) as str decoded from UTF-8 with
 * errors replaced; None for what decode_to_buffer does not take. */
static PyObject *decode_as(PyObject *capsule, PyObject *tokens, int as_text)
{
    const binding *bound = binding_of(capsule);
    if (bound == NULL) return NULL;
    uint8_t stack[STACK_BYTES];
    uint8_t *bytes = NULL, *heap = NULL;
    size_t length = 0;
    int taken = decode_to_buffer(bound, tokens, stack, sizeof stack, &bytes, &length, &heap);
    if (taken <= 0) {
        if (taken < 0) return NULL;
        Py_RETURN_NONE;
    }
    PyObject *result = as_text ? PyUnicode_DecodeUTF8((const char *)bytes, (Py_ssize_t)length, "replace")
                               : PyBytes_FromStringAndSize((const char *)bytes, (Py_ssize_t)length);
    PyMem_RawFree(heap);
    return result;
}

/* decode_bytes(tokens) -> bytes | None */
static PyObject *decoder_decode_bytes(PyObject *capsule, PyObject *tokens)
{
    return decode_as(capsule, tokens, 0);
}

/* decode(tokens) -> str | None: the bytes decoded as UTF-8, errors replaced. */
static PyObject *decoder_decode(PyObject *capsule, PyObject *tokens)
{
    return decode_as(capsule, tokens, 1);
}

/* token_bytes(token) -> bytes | None: the bytes of one id (an int, not a
 * subclass), mergeable or special; None for anything else (the caller's
 * path then says what is wrong). */
static PyObject *decoder_token_bytes(PyObject *capsule, PyObject *token)
{
    const binding *bound = binding_of(capsule);
    if (bound == NULL) return NULL;
    if (!PyLong_CheckExact(token)) Py_RETURN_NONE;
    unsigned long value = PyLong_AsUnsignedLong(token);
    if (value == (unsigned long)-1 && PyErr_Occurred()) {
        PyErr_Clear(); /* negative, or too large */
        Py_RETURN_NONE;
    }
    const uint8_t *bytes = NULL;
    size_t size = 0;
    if (value > UINT32_MAX || tki_token_bytes(bound->vocab, (uint32_t)value, &bytes, &size) != TKI_OK ||
        size > (size_t)PY_SSIZE_T_MAX) {
        Py_RETURN_NONE;
    }
    return PyBytes_FromStringAndSize((const char *)bytes, (Py_ssize_t)size);
}

/* token_rank(text_or_bytes) -> int | None: the rank of the mergeable token
 * that is exactly these bytes (a str's UTF-8); None for anything else (no
 * such token, a special token's text, lone surrogates, neither str nor
 * bytes: the caller's path then takes it). */
static PyObject *decoder_token_rank(PyObject *capsule, PyObject *piece)
{
    const binding *bound = binding_of(capsule);
    if (bound == NULL) return NULL;
    const char *data = NULL;
    Py_ssize_t length = 0;
    if (PyUnicode_Check(piece)) {
        int kept = kept_utf8(piece, &data, &length);
        if (kept <= 0) {
            if (kept < 0) return NULL;
            Py_RETURN_NONE;
        }
    } else if (PyBytes_CheckExact(piece)) {
        data = PyBytes_AS_STRING(piece);
        length = PyBytes_GET_SIZE(piece);
    } else {
        Py_RETURN_NONE;
    }
    uint32_t rank = 0;
    if (tki_token_rank(bound->vocab, (const uint8_t *)data, (size_t)length, &rank) != TKI_OK) Py_RETURN_NONE;
    return PyLong_FromUnsignedLong(rank);
}

static PyMethodDef decoder_methods[] = {
    {"decode_bytes", decoder_decode_bytes, METH_O, "the bytes of a list of ids, or None"},
    {"decode", decoder_decode, METH_O, "the bytes of a list of ids as str (errors replaced), or None"},
    {"token_bytes", decoder_token_bytes, METH_O, "the bytes of one id, or None"},
    {"token_rank", decoder_token_rank, METH_O, "the rank of the mergeable token that is exactly a str's UTF-8 or bytes, or None"},
};

/* decoders(vocab_address, owner) -> (decode_bytes, decode, token_bytes,
 * token_rank) for the tki_vocab at vocab_address, kept alive by `owner`. */
static PyObject *module_decoders(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "decoders(vocab_address, owner)");
        return NULL;
    }
    void *vocab = PyLong_AsVoidPtr(args[0]);
    if (PyErr_Occurred()) return NULL;
    if (vocab == NULL) {
        PyErr_SetString(PyExc_ValueError, "decoders: no vocabulary");
        return NULL;
    }
    return bound_functions(vocab, 0, NULL, NULL, NULL, args[1], NULL, decoder_methods, 4);
}

/* The character at text[*i] as UTF-16 decoding sees it: a high surrogate followed by a
 * low one is the supplementary character they stand for (*i then moves onto the low
 * one), any other surrogate U+FFFD, anything else itself. */
static Py_UCS4 joined_code_point(int kind, const void *data, Py_ssize_t length, Py_ssize_t *i)
{
    Py_UCS4 c = PyUnicode_READ(kind, data, *i);
    if (c < 0xD800 || c > 0xDFFF) return c;
    if (c <= 0xDBFF && *i + 1 < length) {
        Py_UCS4 next = PyUnicode_READ(kind, data, *i + 1);
        if (next >= 0xDC00 && next <= 0xDFFF) {
            (*i)++;
            return 0x10000 + ((c - 0xD800) << 10) + (next - 0xDC00);
        }
    }
    return 0xFFFD;
}

/*
 * The UTF-8 of a str whose surrogates are paired up and whose lone ones become
 * U+FFFD: what tiktoken makes of such a str, text.encode("utf-16",
 * "surrogatepass").decode("utf-16", "replace"), then encoded to UTF-8.  One
 * pass to size it, one to write it.  CPython's codecs call their error handler
 * once per lone surrogate (about 0.2 s for a MiB of random bytes decoded with
 * errors="surrogateescape"); this is a copy, its characters read by
 * joined_code_point.
 */
static PyObject *module_utf8_replacing_surrogates(PyObject *module, PyObject *text)
{
    (void)module;
    if (!PyUnicode_Check(text)) {
        PyErr_Format(PyExc_TypeError, "expected str, got %.100s", Py_TYPE(text)->tp_name);
        return NULL;
    }
    Py_ssize_t length = PyUnicode_GET_LENGTH(text);
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    if (length > PY_SSIZE_T_MAX / 4) return PyErr_NoMemory(); /* at most 4 bytes a character */
    Py_ssize_t size = 0;
    for (Py_ssize_t i = 0; i < length; i++) {
        Py_UCS4 c = joined_code_point(kind, data, length, &i);
        size += c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4;
    }
    PyObject *bytes = PyBytes_FromStringAndSize(NULL, size);
    if (bytes == NULL) return NULL;
    uint8_t *out = (uint8_t *)PyBytes_AS_STRING(bytes);
    for (Py_ssize_t i = 0; i < length; i++) {
        out = code_point_to_utf8(joined_code_point(kind, data, length, &i), out);
    }
    return bytes;
}

/*
 * The UTF-8 of a str as bytes: a copy of the UTF-8 CPython keeps for it
 * (made once and kept with the str, as every encode call reads it), so that
 * a text already encoded is not converted again; lone surrogates paired or
 * replaced as utf8_replacing_surrogates does.
 */
static PyObject *module_utf8_bytes(PyObject *module, PyObject *text)
{
    if (!PyUnicode_Check(text)) {
        PyErr_Format(PyExc_TypeError, "expected str, got %.100s", Py_TYPE(text)->tp_name);
        return NULL;
    }
    const char *data = NULL;
    Py_ssize_t length = 0;
    int kept = kept_utf8(text, &data, &length);
    if (kept <= 0) return kept < 0 ? NULL : module_utf8_replacing_surrogates(module, text);
    return PyBytes_FromStringAndSize(data, length);
}

#include "_tki_stream.c"

static PyMethodDef module_methods[] = {
    {"decoders", (PyCFunction)(void (*)(void))module_decoders, METH_FASTCALL,
     "decoders(vocab_address, owner) -> (decode_bytes, decode, token_bytes, token_rank)"},
    {"encoders", (PyCFunction)(void (*)(void))module_encoders, METH_FASTCALL,
     "encoders(vocab_address, pattern, refused_address, owner) -> (encode, encode_many, encode_unless_special)"},
    {"ordinary_encoder", (PyCFunction)(void (*)(void))module_ordinary_encoder, METH_FASTCALL,
     "ordinary_encoder(vocab_address, pattern, owner, fallback) -> encode_ordinary"},
    {"special_batch_encoder", (PyCFunction)(void (*)(void))module_special_batch_encoder, METH_FASTCALL,
     "special_batch_encoder(vocab_address, pattern, refused_address, allowed_address, owner) -> "
     "encode_many_with_specials"},
    {"flat_encoder", (PyCFunction)(void (*)(void))module_flat_encoder, METH_FASTCALL,
     "flat_encoder(vocab_address, pattern, refused_address, allowed_address, owner) -> encode_flat"},
    {"held_method", (PyCFunction)(void (*)(void))module_held_method, METH_FASTCALL,
     "held_method(function, attribute[, failure]) -> a method standing for function, calling getattr(self, attribute)(text); "
     "with a third argument (a hook's name, or None) None held or returned is the function's call"},
    {"id_list", (PyCFunction)(void (*)(void))module_id_list, METH_FASTCALL,
     "id_list(address, count) -> list of the uint32 ids at address"},
    {"add_to_offsets", (PyCFunction)(void (*)(void))module_add_to_offsets, METH_FASTCALL,
     "add_to_offsets(buffer, delta) -> None: delta added to each native int64 of a writable buffer"},
    {"scratch_bytes", module_scratch_bytes, METH_NOARGS,
     "scratch_bytes() -> the bytes of one-shot scratch (ids arrays) this thread keeps for its next call"},
    {"utf8_replacing_surrogates", module_utf8_replacing_surrogates, METH_O,
     "utf8_replacing_surrogates(text) -> its UTF-8, surrogates paired, lone ones U+FFFD"},
    {"utf8_bytes", module_utf8_bytes, METH_O,
     "utf8_bytes(text) -> its UTF-8 (a copy of the one the str keeps), surrogates paired, lone ones U+FFFD"},
    {"stream_encoder", (PyCFunction)(void (*)(void))module_stream_encoder, METH_FASTCALL,
     "stream_encoder(vocab_address, pattern, compiled_address, allowed_address, refused_address, flags, owner) "
     "-> (feed, finish, info)"},
    {"bounded", (PyCFunction)(void (*)(void))module_bounded, METH_FASTCALL,
     "bounded(vocab_address, pattern, compiled_address, allowed_address, refused_address, text, cap, want_ids) -> "
     "(ids | None, count, exceeded, bytes_read) | refused string index"},
    {"counter", (PyCFunction)(void (*)(void))module_counter, METH_FASTCALL,
     "counter(vocab_address, pattern, refused_address, owner[, compiled_address]) -> count(text, limit=None)"},
    {"truncate", (PyCFunction)(void (*)(void))module_truncate, METH_FASTCALL,
     "truncate(vocab_address, pattern, compiled_address, allowed_address, refused_address, text, max_tokens) -> "
     "(ids, prefix_bytes, prefix_characters) | refused string index"},
    {NULL, NULL, 0, NULL},
};

int32_t tki_python_install(void)
{
    PyGILState_STATE gil = PyGILState_Ensure();
    int32_t status = -1;
    PyObject *module = PyImport_ImportModule("tiktoken_inc._tki");
    if (module != NULL) {
        if (scratch_key == NULL) scratch_key = PyUnicode_InternFromString("tiktoken_inc._tki.one_shot_scratch");
        status = scratch_key == NULL                            ? -1
                 : PyObject_HasAttrString(module, "encoders") ? 0
                                                               : PyModule_AddFunctions(module, module_methods);
        Py_DECREF(module);
    }
    if (status != 0) PyErr_Clear();
    PyGILState_Release(gil);
    return status;
}
