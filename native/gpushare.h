/*
 * gpushare.h — the GPU Share registry, ABI v1.
 *
 * One shared-memory segment per physical GPU, 4096 bytes: a 16-byte header and 16 slots of
 * 88 bytes (ending at 1424; the rest is zero). All integers little-endian. The segment is the file
 * that cosmopolitan libc's shm_open("/opencoti-gpu-<gpu_key>") opens (opencoti's peers use it):
 * <dir>/<hex of BLAKE2b-256 of that name>.sem, dir /dev/shm/ on Linux (/tmp/ where that is not a
 * directory), /tmp/ on macOS, the temp folder on Windows (see docs/registry.md). The caller
 * computes that path (TypeScript: electron/core/registry/location.ts) and passes it in.
 *
 * The layout is the natural C layout of opencoti's own field list (pid, boot_us, weight, active,
 * heartbeat_us, busy_ppm, name[48]): real opencoti-llamafile peers write the same segment, and any
 * C compiler lays that struct out this way. Our two extra words live only in its alignment holes
 * (seq in the hole after pid, owner_pid in the tail padding after name), so a peer that leaves
 * them zero stays readable: seq 0 is an even (consistent) seq, owner_pid 0 means "pid itself".
 * Every offset is asserted below.
 *
 * This helper exists because Electron forbids ArrayBuffers over foreign memory: JavaScript never
 * sees the mapping, only copies made by gs_snapshot() and the few atomic writes below.
 */
#ifndef GPUSHARE_H
#define GPUSHARE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define GS_API __declspec(dllexport)
#else
#define GS_API __attribute__((visibility("default")))
#endif

#define GS_MAGIC "OCGPU"
#define GS_VERSION 1u
#define GS_SLOT_COUNT 16u
#define GS_SEGMENT_SIZE 4096u
#define GS_HEADER_SIZE 16u
#define GS_SLOT_SIZE 88u
#define GS_NAME_SIZE 48u
/* Longest segment path accepted, in bytes of UTF-8 with its NUL. */
#define GS_PATH_MAX 1024u

typedef struct gs_header {
    char magic[8];       /* "OCGPU", NUL-padded */
    uint32_t version;    /* GS_VERSION */
    uint32_t slot_count; /* GS_SLOT_COUNT */
} gs_header;

typedef struct gs_slot {
    uint32_t pid;          /* engine pid; 0 = free; claimed by CAS 0 -> pid (or dead pid -> pid) */
    uint32_t seq;          /* (alignment hole) odd while the owner updates several fields; 0 from a
                              peer that has no seq */
    int64_t boot_us;       /* wall-clock µs when the engine process started */
    float weight;          /* > 0 */
    uint32_t active;       /* 1 if it decoded or prefilled within the last 2 s */
    int64_t heartbeat_us;  /* CLOCK_REALTIME µs, stored atomically every ~500 ms */
    uint32_t busy_ppm;     /* measured busy fraction, parts per million */
    char name[GS_NAME_SIZE]; /* UTF-8, NUL-padded, display only */
    uint32_t owner_pid;    /* (tail padding) the process writing this slot (= pid, or its
                              supervisor); 0 means pid */
} gs_slot;

typedef struct gs_segment_layout {
    gs_header header;
    gs_slot slots[GS_SLOT_COUNT];
} gs_segment_layout;

_Static_assert(sizeof(float) == 4, "f32");
_Static_assert(offsetof(gs_header, magic) == 0, "header.magic");
_Static_assert(offsetof(gs_header, version) == 8, "header.version");
_Static_assert(offsetof(gs_header, slot_count) == 12, "header.slot_count");
_Static_assert(sizeof(gs_header) == GS_HEADER_SIZE, "header size");
_Static_assert(offsetof(gs_slot, pid) == 0, "slot.pid");
_Static_assert(offsetof(gs_slot, seq) == 4, "slot.seq");
_Static_assert(offsetof(gs_slot, boot_us) == 8, "slot.boot_us");
_Static_assert(offsetof(gs_slot, weight) == 16, "slot.weight");
_Static_assert(offsetof(gs_slot, active) == 20, "slot.active");
_Static_assert(offsetof(gs_slot, heartbeat_us) == 24, "slot.heartbeat_us");
_Static_assert(offsetof(gs_slot, busy_ppm) == 32, "slot.busy_ppm");
_Static_assert(offsetof(gs_slot, name) == 36, "slot.name");
_Static_assert(offsetof(gs_slot, owner_pid) == 84, "slot.owner_pid");
_Static_assert(sizeof(gs_slot) == GS_SLOT_SIZE, "slot size");
_Static_assert(offsetof(gs_segment_layout, slots) == GS_HEADER_SIZE, "first slot");
_Static_assert(sizeof(gs_segment_layout) == GS_HEADER_SIZE + GS_SLOT_COUNT * GS_SLOT_SIZE, "layout");
_Static_assert(sizeof(gs_segment_layout) <= GS_SEGMENT_SIZE, "segment size");

/*
 * Status codes. Each says what the caller does next.
 */
enum {
    /* Done. */
    GS_OK = 0,
    /* A compare-and-swap lost a race or the slot is no longer ours: re-read and decide again. */
    GS_LOST = 1,
    /* Bad argument (null handle, bad key, slot out of range): a bug in the caller; fix the call. */
    GS_ERR_ARG = -1,
    /* The segment does not exist (open without GS_OPEN_CREATE): nobody has joined yet. */
    GS_ERR_NOT_FOUND = -2,
    /* The OS refused access (permissions, another user's segment): report it; do not retry. */
    GS_ERR_ACCESS = -3,
    /* Another OS failure (see gs_last_os_error): report it with the OS code. */
    GS_ERR_OS = -4,
    /* Foreign segment: wrong size. Never written; report it and leave it alone. */
    GS_ERR_FOREIGN_SIZE = -5,
    /* Foreign segment: wrong magic. Never written. */
    GS_ERR_FOREIGN_MAGIC = -6,
    /* Foreign segment: wrong version. Never written. */
    GS_ERR_FOREIGN_VERSION = -7,
    /* Foreign segment: wrong slot count. Never written. */
    GS_ERR_FOREIGN_SLOT_COUNT = -8,
    /* Opened read-only: writes are refused; open read-write to join. */
    GS_ERR_READONLY = -9,
    /* Refused, never opened further, bytes and mode untouched (see gs_open): the name is a
     * symbolic link (or a Windows object link). */
    GS_ERR_SYMLINK = -10,
    /* Refused: the name is a FIFO (opened non-blocking, so the open did not hang). */
    GS_ERR_FIFO = -11,
    /* Refused: the name is a directory. */
    GS_ERR_DIRECTORY = -12,
    /* Refused: the name is a device, a socket or anything else that is not a regular file. */
    GS_ERR_NOT_REGULAR = -13,
    /* Refused: the segment belongs to another user (and GS_OPEN_SHARED was not given).
     * gs_last_os_error() returns the owner's uid on POSIX (0 on Windows). */
    GS_ERR_OTHER_USER = -14,
    /* The file shrank under its mapping or its size changed (someone truncated it): the access
     * was caught (no SIGBUS), and every later call on this handle returns the same. The registry is
     * broken: close the handle, run unpaced, and open the path again later. */
    GS_ERR_TRUNCATED = -15
};

/* gs_open flags */
#define GS_OPEN_CREATE 1u   /* create the segment (exclusively, then initialise) if it is missing */
#define GS_OPEN_READONLY 2u /* map read-only: an observer that never joins */
/* Shared registries: accept a segment of another user, and create ours readable and writable by
 * every local user (mode 0666; a NULL DACL on Windows). This trusts every local user. */
#define GS_OPEN_SHARED 4u

/* gs_open's *opened bits */
#define GS_OPENED_CREATED 1u  /* this call created the segment */
#define GS_OPENED_TIGHTENED 2u /* ours, opened without GS_OPEN_SHARED, others could write it: set
                                  back to 0600 (POSIX) */

typedef struct gs_segment gs_segment;

/*
 * Open the segment file at `path` (UTF-8, 1..GS_PATH_MAX-1 bytes, computed by the caller). With
 * GS_OPEN_CREATE a missing file is created exclusively with `mode` (0600 when 0) and its header
 * initialised. Opening never blocks and never follows a link: O_NOFOLLOW | O_NONBLOCK, then fstat
 * (Windows: FILE_FLAG_OPEN_REPARSE_POINT, then the handle's attributes). A symlink, FIFO,
 * directory, device or socket at the path, or a file of another user (unless GS_OPEN_SHARED), is
 * refused with its own code and left exactly as it was. A file of this user is ours; opened
 * without GS_OPEN_SHARED, one that others can write is set back to 0600 (*opened has
 * GS_OPENED_TIGHTENED). A 0-byte one of this user is waited on briefly (its creator is sizing it).
 * An existing file is validated (size, magic, version, slot count) through a read-only mapping
 * first and is never written when it does not match. *opened gets GS_OPENED_* bits. Returns GS_OK
 * or a GS_ERR_* code.
 */
GS_API int32_t gs_open(const char *path, uint32_t flags, uint32_t mode, gs_segment **out,
                       int32_t *opened);
GS_API void gs_close(gs_segment *seg);
/* The OS error (errno or GetLastError) of the last failing call on this thread. */
GS_API int32_t gs_last_os_error(void);
/* Remove the segment file. For tests and tools only: the last leaver never unlinks. */
GS_API int32_t gs_unlink(const char *path);
/* The folder cosmopolitan means by "/tmp/", with its trailing separator, as UTF-8 into buf:
 * GetTempPathW() on Windows (the only OS where the caller needs it), "/tmp/" on POSIX. Returns its
 * length in bytes, GS_ERR_ARG when it does not fit in cap (with its NUL), GS_ERR_OS when the OS
 * has none. */
GS_API int32_t gs_temp_dir(char *buf, uint32_t cap);

/* CLOCK_REALTIME in µs: the one wall clock all peers share. */
GS_API int64_t gs_wall_us(void);

/*
 * Copy the whole segment into buf (len >= GS_SEGMENT_SIZE). Each slot is copied under its seq,
 * which is a hint only (a peer without seq may leave anything in that hole): a copy is consistent
 * when seq was even and unchanged around it, or when it equals the copy before it. Otherwise it is
 * retried up to `retries` times; a slot still torn keeps the bytes of its last copy (to be used as
 * read) and its bit (1 << i) is set in *torn_mask.
 */
GS_API int32_t gs_snapshot(gs_segment *seg, uint8_t *buf, uint32_t len, uint32_t retries,
                           uint32_t *torn_mask);

/*
 * Claim slot `slot` by compare-and-swap of its pid from expected_pid (0 for a free slot, or the
 * pid of a slot the caller judged dead) to pid. For a dead slot the heartbeat must still equal
 * expected_heartbeat_us (a slot that came back to life is not taken). On success every field is
 * written under the seq bracket and the heartbeat set to now_us. Returns GS_OK or GS_LOST.
 */
GS_API int32_t gs_claim(gs_segment *seg, uint32_t slot, uint32_t expected_pid,
                        int64_t expected_heartbeat_us, uint32_t pid, uint32_t owner_pid,
                        int64_t boot_us, float weight, uint32_t active, const char *name,
                        int64_t now_us);

/* Store the heartbeat atomically if the slot still holds (pid, boot_us); GS_LOST otherwise:
 * the caller was presumed dead and must join again. */
GS_API int32_t gs_heartbeat(gs_segment *seg, uint32_t slot, uint32_t pid, int64_t boot_us,
                            int64_t now_us);

/* Seq-bracketed update of the mutable fields of our slot; GS_LOST when it is no longer ours.
 * name may be NULL to keep the current one. */
GS_API int32_t gs_update(gs_segment *seg, uint32_t slot, uint32_t pid, int64_t boot_us,
                         float weight, uint32_t active, uint32_t busy_ppm, uint32_t owner_pid,
                         const char *name);

/* Release our slot: clear it (both holes included) under the seq bracket, then CAS the pid back
 * to 0 and zero the seq hole. */
GS_API int32_t gs_release(gs_segment *seg, uint32_t slot, uint32_t pid, int64_t boot_us);

#ifdef __cplusplus
}
#endif
#endif
