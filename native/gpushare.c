/*
 * gpushare.c — the registry helper: map the segment, validate it, claim and release slots with
 * compare-and-swap, store heartbeats atomically, update slots under their seq, and copy
 * consistent snapshots into caller buffers. Everything else (liveness, shares, views) lives in
 * TypeScript; this file keeps to what JavaScript cannot do inside Electron's memory cage.
 *
 * Concurrency model (see DESIGN.md): one writer per slot, no locks. A writer makes seq odd, writes,
 * then makes it even; readers retry a torn slot a bounded number of times.
 */
#if !defined(_WIN32) && !defined(_GNU_SOURCE)
#define _GNU_SOURCE
#endif
#include "gpushare.h"

#include <string.h>

#if defined(_WIN32)
#define WIN32_LEAN_AND_MEAN
#include <windows.h>
#include <aclapi.h>
#if defined(_MSC_VER)
#pragma comment(lib, "advapi32.lib")
#endif
#else
#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#endif

/* ---- atomics: GCC/Clang builtins (also mingw-w64), Interlocked* under MSVC ---- */
#if defined(_MSC_VER) && !defined(__clang__)
#include <intrin.h>
static uint32_t ld32(const volatile uint32_t *p) { uint32_t v = *p; _ReadWriteBarrier(); return v; }
static void st32(volatile uint32_t *p, uint32_t v) { _ReadWriteBarrier(); *p = v; _ReadWriteBarrier(); }
static int64_t ld64(const volatile int64_t *p) { return (int64_t)InterlockedCompareExchange64((volatile LONG64 *)p, 0, 0); }
static void st64(volatile int64_t *p, int64_t v) { InterlockedExchange64((volatile LONG64 *)p, v); }
static int cas32(volatile uint32_t *p, uint32_t expected, uint32_t desired) {
    return (uint32_t)InterlockedCompareExchange((volatile LONG *)p, (LONG)desired, (LONG)expected) == expected;
}
static void fence(void) { MemoryBarrier(); }
#else
static uint32_t ld32(const volatile uint32_t *p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
static void st32(volatile uint32_t *p, uint32_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }
static int64_t ld64(const volatile int64_t *p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
static void st64(volatile int64_t *p, int64_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }
static int cas32(volatile uint32_t *p, uint32_t expected, uint32_t desired) {
    return __atomic_compare_exchange_n(p, &expected, desired, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
}
static void fence(void) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
#endif

struct gs_segment {
    volatile uint8_t *base;
    int readonly;
#if defined(_WIN32)
    HANDLE mapping;
#endif
};

#if defined(_MSC_VER) && !defined(__clang__)
static __declspec(thread) int32_t last_os_error;
#else
static __thread int32_t last_os_error;
#endif

int32_t gs_last_os_error(void) { return last_os_error; }

static int valid_key(const char *key) {
    size_t n;
    if (key == NULL) return 0;
    n = strlen(key);
    if (n == 0 || n > GS_KEY_MAX) return 0;
    for (size_t i = 0; i < n; i++) {
        char c = key[i];
        int ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                 c == '.' || c == '_' || c == '-';
        if (!ok) return 0;
    }
    return 1;
}

/* Validate a mapped header; the mapping may be read-only, so this only reads. */
static int32_t check_header(const volatile uint8_t *base) {
    static const char magic[8] = {'O', 'C', 'G', 'P', 'U', 0, 0, 0};
    const volatile gs_header *h = (const volatile gs_header *)base;
    for (int i = 0; i < 8; i++) {
        if (h->magic[i] != magic[i]) return GS_ERR_FOREIGN_MAGIC;
    }
    if (ld32(&h->version) != GS_VERSION) return GS_ERR_FOREIGN_VERSION;
    if (ld32(&h->slot_count) != GS_SLOT_COUNT) return GS_ERR_FOREIGN_SLOT_COUNT;
    return GS_OK;
}

/* A segment whose creator has not yet published the magic is "initialising", not foreign. */
static int all_zero(const volatile uint8_t *p, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (p[i] != 0) return 0;
    }
    return 1;
}

/* Initialise a fresh (all-zero) segment. The magic is published last, as one 64-bit store, so a
 * concurrent opener sees either zeros (and waits) or a complete header. Adopting an abandoned
 * all-zero segment runs the same code; two adopters write the same values. */
static void init_header(volatile uint8_t *base) {
    volatile gs_header *h = (volatile gs_header *)base;
    uint64_t magic = 0;
    memcpy(&magic, "OCGPU\0\0\0", 8);
    st32(&h->version, GS_VERSION);
    st32(&h->slot_count, GS_SLOT_COUNT);
    fence();
    st64((volatile int64_t *)(void *)h->magic, (int64_t)magic);
}

static void sleep_ms(int ms) {
#if defined(_WIN32)
    Sleep((DWORD)ms);
#else
    struct timespec ts = {0, (long)ms * 1000000L};
    nanosleep(&ts, NULL);
#endif
}

/* How long an opener waits for a creator to finish initialising before it adopts the segment. */
#define INIT_WAIT_MS 1000
#define INIT_POLL_MS 5

/* Judge an existing segment through a read-only view, on every platform: wait (the rest of
 * INIT_WAIT_MS after `waited_ms`) for a creator to publish the header, then check it. A segment
 * still all zero was abandoned by a creator that died first: *adopt is set (never for a read-only
 * opener, which finds "nobody has joined"). Anything else without our header is foreign. */
static int32_t judge_existing(const volatile uint8_t *view, int readonly, int waited_ms, int *adopt) {
    *adopt = 0;
    for (; all_zero(view, GS_HEADER_SIZE) && waited_ms < INIT_WAIT_MS; waited_ms += INIT_POLL_MS) sleep_ms(INIT_POLL_MS);
    if (!all_zero(view, GS_HEADER_SIZE)) return check_header(view);
    if (readonly) return GS_ERR_NOT_FOUND;
    if (!all_zero(view, GS_SEGMENT_SIZE)) return GS_ERR_FOREIGN_MAGIC;
    *adopt = 1;
    return GS_OK;
}

#if defined(_WIN32)

int64_t gs_wall_us(void) {
    FILETIME ft;
    ULARGE_INTEGER t;
    GetSystemTimePreciseAsFileTime(&ft);
    t.LowPart = ft.dwLowDateTime;
    t.HighPart = ft.dwHighDateTime;
    /* 100 ns ticks since 1601 -> µs since 1970 */
    return (int64_t)(t.QuadPart / 10ULL) - 11644473600000000LL;
}

static void make_name(const char *key, wchar_t *out, size_t cap) {
    const char *prefix = "Local\\opencoti-gpu-";
    size_t j = 0;
    for (size_t i = 0; prefix[i] && j + 1 < cap; i++) out[j++] = (wchar_t)prefix[i];
    for (size_t i = 0; key[i] && j + 1 < cap; i++) out[j++] = (wchar_t)key[i];
    out[j] = 0;
}

/* A section of this user: its owner is our user, or the default owner our token gives the objects
 * it creates (the Administrators group for an elevated process). The Windows form of the POSIX
 * st_uid check; a section another user created in our session's namespace is refused. */
static int32_t check_owner(HANDLE mapping) {
    PSID owner = NULL;
    PSECURITY_DESCRIPTOR sd = NULL;
    HANDLE token = NULL;
    union { TOKEN_USER user; uint8_t bytes[256]; } user_buf;
    union { TOKEN_OWNER owner; uint8_t bytes[256]; } owner_buf;
    DWORD len = 0;
    int32_t rc = GS_ERR_OTHER_USER;
    DWORD err = GetSecurityInfo(mapping, SE_KERNEL_OBJECT, OWNER_SECURITY_INFORMATION, &owner, NULL, NULL, NULL, &sd);
    if (err != ERROR_SUCCESS) {
        last_os_error = (int32_t)err;
        return GS_ERR_OS;
    }
    if (!OpenProcessToken(GetCurrentProcess(), TOKEN_QUERY, &token)) {
        last_os_error = (int32_t)GetLastError();
        LocalFree(sd);
        return GS_ERR_OS;
    }
    if (GetTokenInformation(token, TokenUser, &user_buf, sizeof user_buf, &len) && EqualSid(owner, user_buf.user.User.Sid)) rc = GS_OK;
    if (rc != GS_OK && GetTokenInformation(token, TokenOwner, &owner_buf, sizeof owner_buf, &len) && EqualSid(owner, owner_buf.owner.Owner)) rc = GS_OK;
    CloseHandle(token);
    LocalFree(sd);
    if (rc != GS_OK) last_os_error = 0;
    return rc;
}

int32_t gs_open(const char *gpu_key, uint32_t flags, uint32_t mode, gs_segment **out, int32_t *created) {
    wchar_t name[96];
    HANDLE mapping;
    int was_created = 0;
    const int readonly = (flags & GS_OPEN_READONLY) != 0;
    const int shared = (flags & GS_OPEN_SHARED) != 0;
    /* The default DACL of a Local\ object limits it to this user; a shared registry has none. */
    SECURITY_DESCRIPTOR open_sd;
    SECURITY_ATTRIBUTES open_sa;
    (void)mode;
    if (out == NULL || !valid_key(gpu_key)) return GS_ERR_ARG;
    *out = NULL;
    if (created) *created = 0;
    make_name(gpu_key, name, sizeof name / sizeof name[0]);
    if ((flags & GS_OPEN_CREATE) && !readonly) {
        SECURITY_ATTRIBUTES *attributes = NULL;
        if (shared && InitializeSecurityDescriptor(&open_sd, SECURITY_DESCRIPTOR_REVISION) &&
            SetSecurityDescriptorDacl(&open_sd, TRUE, NULL, FALSE)) {
            open_sa.nLength = sizeof open_sa;
            open_sa.lpSecurityDescriptor = &open_sd;
            open_sa.bInheritHandle = FALSE;
            attributes = &open_sa;
        }
        mapping = CreateFileMappingW(INVALID_HANDLE_VALUE, attributes, PAGE_READWRITE, 0, GS_SEGMENT_SIZE, name);
        if (mapping == NULL) {
            last_os_error = (int32_t)GetLastError();
            return last_os_error == ERROR_ACCESS_DENIED ? GS_ERR_ACCESS : GS_ERR_OS;
        }
        was_created = GetLastError() != ERROR_ALREADY_EXISTS;
    } else {
        mapping = OpenFileMappingW(readonly ? FILE_MAP_READ : FILE_MAP_ALL_ACCESS, FALSE, name);
        if (mapping == NULL) {
            last_os_error = (int32_t)GetLastError();
            if (last_os_error == ERROR_FILE_NOT_FOUND) return GS_ERR_NOT_FOUND;
            return last_os_error == ERROR_ACCESS_DENIED ? GS_ERR_ACCESS : GS_ERR_OS;
        }
    }
    if (!was_created && !shared) {
        int32_t owner_rc = check_owner(mapping);
        if (owner_rc != GS_OK) {
            CloseHandle(mapping);
            return owner_rc;
        }
    }
    /* Validate through a read-only view first: a foreign section is never written. */
    volatile uint8_t *view = (volatile uint8_t *)MapViewOfFile(mapping, FILE_MAP_READ, 0, 0, 0);
    if (view == NULL) {
        last_os_error = (int32_t)GetLastError();
        CloseHandle(mapping);
        return GS_ERR_OS;
    }
    MEMORY_BASIC_INFORMATION info;
    if (VirtualQuery((LPCVOID)view, &info, sizeof info) == 0 || info.RegionSize != GS_SEGMENT_SIZE) {
        /* Section sizes are page-rounded here; a 4096-byte page is exactly our size. */
        UnmapViewOfFile((LPCVOID)view);
        CloseHandle(mapping);
        return GS_ERR_FOREIGN_SIZE;
    }
    int32_t rc = GS_OK;
    if (!was_created) rc = judge_existing(view, readonly, 0, &was_created);
    UnmapViewOfFile((LPCVOID)view);
    if (rc != GS_OK) {
        CloseHandle(mapping);
        return rc;
    }
    view = (volatile uint8_t *)MapViewOfFile(mapping, readonly ? FILE_MAP_READ : FILE_MAP_ALL_ACCESS, 0, 0, GS_SEGMENT_SIZE);
    if (view == NULL) {
        last_os_error = (int32_t)GetLastError();
        CloseHandle(mapping);
        return GS_ERR_OS;
    }
    if (was_created) init_header(view);
    gs_segment *seg = (gs_segment *)HeapAlloc(GetProcessHeap(), HEAP_ZERO_MEMORY, sizeof(gs_segment));
    if (seg == NULL) {
        UnmapViewOfFile((LPCVOID)view);
        CloseHandle(mapping);
        return GS_ERR_OS;
    }
    seg->base = view;
    seg->readonly = readonly;
    seg->mapping = mapping;
    if (created) *created = was_created;
    *out = seg;
    return GS_OK;
}

void gs_close(gs_segment *seg) {
    if (seg == NULL) return;
    UnmapViewOfFile((LPCVOID)seg->base);
    CloseHandle(seg->mapping);
    HeapFree(GetProcessHeap(), 0, seg);
}

int32_t gs_unlink(const char *gpu_key) {
    /* Windows removes a section with its last handle. */
    return valid_key(gpu_key) ? GS_OK : GS_ERR_ARG;
}

#else /* POSIX */

#include <stdlib.h>

int64_t gs_wall_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000LL + (int64_t)(ts.tv_nsec / 1000);
}

static void make_name(const char *key, char *out, size_t cap) {
    size_t j = 0;
    const char *prefix = "/opencoti-gpu-";
    for (size_t i = 0; prefix[i] && j + 1 < cap; i++) out[j++] = prefix[i];
    for (size_t i = 0; key[i] && j + 1 < cap; i++) out[j++] = key[i];
    out[j] = 0;
}

static int32_t map_errno(int e) {
    last_os_error = e;
    if (e == ENOENT) return GS_ERR_NOT_FOUND;
    if (e == EACCES || e == EPERM) return GS_ERR_ACCESS;
    if (e == ELOOP) return GS_ERR_SYMLINK; /* O_NOFOLLOW met a link */
    if (e == EISDIR) return GS_ERR_DIRECTORY;
#if defined(__linux__)
    /* glibc's shm_open reports a directory opened for writing as EINVAL (the name was validated). */
    if (e == EINVAL) return GS_ERR_DIRECTORY;
#endif
    return GS_ERR_OS;
}

/* Never block, never follow a link. Linux shared memory is a file in /dev/shm that any user may
 * replace by a FIFO (whose open would block forever), a directory or a link; glibc passes these
 * flags through to open(). Elsewhere (macOS) a shm object is not a file: no FIFO or link can be
 * at its name, and shm_open takes no other flags. */
#if defined(__linux__)
#define GS_SAFE_OPEN_FLAGS (O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
#else
#define GS_SAFE_OPEN_FLAGS 0
#endif

/* What is at the name, judged on the open descriptor (no race with a rename): a regular file of
 * this user, or of anyone with GS_OPEN_SHARED. Anything else is refused and left as it is. */
static int32_t check_file(int fd, int shared) {
    struct stat st;
    if (fstat(fd, &st) != 0) return map_errno(errno);
    if (S_ISFIFO(st.st_mode)) return GS_ERR_FIFO;
    if (S_ISDIR(st.st_mode)) return GS_ERR_DIRECTORY;
    if (!S_ISREG(st.st_mode)) return GS_ERR_NOT_REGULAR;
    if (!shared && st.st_uid != geteuid()) {
        last_os_error = (int32_t)st.st_uid;
        return GS_ERR_OTHER_USER;
    }
    return GS_OK;
}

/* Open an existing segment: check what it is, validate it read-only, then map it as asked. */
static int32_t open_existing(int fd, int readonly, int shared, volatile uint8_t **out_base, int *adopt) {
    struct stat st;
    int waited = 0;
    *adopt = 0;
    int32_t kind = check_file(fd, shared);
    if (kind != GS_OK) return kind;
    for (;;) {
        if (fstat(fd, &st) != 0) return map_errno(errno);
        if (st.st_size != 0 || waited >= INIT_WAIT_MS) break;
        sleep_ms(INIT_POLL_MS); /* the creator has not sized it yet */
        waited += INIT_POLL_MS;
    }
    if (st.st_size == 0) {
        /* Its creator died between shm_open and ftruncate. */
        if (readonly) return GS_ERR_NOT_FOUND;
        if (ftruncate(fd, GS_SEGMENT_SIZE) != 0) return map_errno(errno);
        if (fstat(fd, &st) != 0) return map_errno(errno);
    }
    if (st.st_size != (off_t)GS_SEGMENT_SIZE) return GS_ERR_FOREIGN_SIZE;
    volatile uint8_t *ro = (volatile uint8_t *)mmap(NULL, GS_SEGMENT_SIZE, PROT_READ, MAP_SHARED, fd, 0);
    if ((void *)ro == MAP_FAILED) return map_errno(errno);
    int32_t rc = judge_existing(ro, readonly, waited, adopt);
    if (rc != GS_OK || readonly) {
        if (rc != GS_OK) munmap((void *)ro, GS_SEGMENT_SIZE);
        else *out_base = ro;
        return rc;
    }
    munmap((void *)ro, GS_SEGMENT_SIZE);
    volatile uint8_t *rw = (volatile uint8_t *)mmap(NULL, GS_SEGMENT_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if ((void *)rw == MAP_FAILED) return map_errno(errno);
    *out_base = rw;
    return GS_OK;
}

int32_t gs_open(const char *gpu_key, uint32_t flags, uint32_t mode, gs_segment **out, int32_t *created) {
    char name[GS_NAME_MAX];
    const int readonly = (flags & GS_OPEN_READONLY) != 0;
    const int shared = (flags & GS_OPEN_SHARED) != 0;
    int was_created = 0;
    int fd = -1;
    volatile uint8_t *base = NULL;
    if (out == NULL || !valid_key(gpu_key)) return GS_ERR_ARG;
    *out = NULL;
    if (created) *created = 0;
    if (mode == 0) mode = 0600;
    make_name(gpu_key, name, sizeof name);
    if ((flags & GS_OPEN_CREATE) && !readonly) {
        fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL | GS_SAFE_OPEN_FLAGS, (mode_t)mode);
        if (fd >= 0) {
            was_created = 1;
        } else if (errno != EEXIST) {
            return map_errno(errno);
        }
    }
    if (fd < 0) {
        fd = shm_open(name, (readonly ? O_RDONLY : O_RDWR) | GS_SAFE_OPEN_FLAGS, 0);
        if (fd < 0) return map_errno(errno);
    }
    int32_t rc = GS_OK;
    if (was_created) {
        /* umask may have narrowed the mode; the mode asked for is the mode we get. */
        if (fchmod(fd, (mode_t)mode) != 0 || ftruncate(fd, GS_SEGMENT_SIZE) != 0) {
            rc = map_errno(errno);
        } else {
            base = (volatile uint8_t *)mmap(NULL, GS_SEGMENT_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
            if ((void *)base == MAP_FAILED) rc = map_errno(errno);
            else init_header(base);
        }
        if (rc != GS_OK) shm_unlink(name);
    } else {
        int adopt = 0;
        rc = open_existing(fd, readonly, shared, &base, &adopt);
        if (rc == GS_OK && adopt) init_header(base);
    }
    close(fd); /* the mapping keeps the object alive */
    if (rc != GS_OK) return rc;
    gs_segment *seg = (gs_segment *)calloc(1, sizeof(gs_segment));
    if (seg == NULL) {
        munmap((void *)base, GS_SEGMENT_SIZE);
        return map_errno(ENOMEM);
    }
    seg->base = base;
    seg->readonly = readonly;
    if (created) *created = was_created;
    *out = seg;
    return GS_OK;
}

void gs_close(gs_segment *seg) {
    if (seg == NULL) return;
    munmap((void *)seg->base, GS_SEGMENT_SIZE);
    free(seg);
}

int32_t gs_unlink(const char *gpu_key) {
    char name[GS_NAME_MAX];
    if (!valid_key(gpu_key)) return GS_ERR_ARG;
    make_name(gpu_key, name, sizeof name);
    if (shm_unlink(name) != 0) return map_errno(errno);
    return GS_OK;
}

#endif

/* ---- slots: the same on every platform ---- */

static volatile gs_slot *slot_at(gs_segment *seg, uint32_t i) {
    return (volatile gs_slot *)(seg->base + GS_HEADER_SIZE + (size_t)i * GS_SLOT_SIZE);
}

static int writable_slot(gs_segment *seg, uint32_t slot) {
    return seg != NULL && slot < GS_SLOT_COUNT && !seg->readonly;
}

static void copy_words(volatile uint32_t *dst, const volatile uint32_t *src, size_t words) {
    for (size_t i = 0; i < words; i++) dst[i] = src[i];
}

int32_t gs_snapshot(gs_segment *seg, uint8_t *buf, uint32_t len, uint32_t retries, uint32_t *torn_mask) {
    uint32_t torn = 0;
    if (seg == NULL || buf == NULL || len < GS_SEGMENT_SIZE) return GS_ERR_ARG;
    fence();
    copy_words((volatile uint32_t *)(void *)buf, (const volatile uint32_t *)(const void *)seg->base, GS_HEADER_SIZE / 4);
    memset(buf + GS_HEADER_SIZE + GS_SLOT_COUNT * GS_SLOT_SIZE, 0,
           GS_SEGMENT_SIZE - GS_HEADER_SIZE - GS_SLOT_COUNT * GS_SLOT_SIZE);
    for (uint32_t i = 0; i < GS_SLOT_COUNT; i++) {
        volatile gs_slot *s = slot_at(seg, i);
        uint8_t *dst = buf + GS_HEADER_SIZE + (size_t)i * GS_SLOT_SIZE;
        int ok = 0;
        /* A torn slot keeps the bytes of its last attempt: pid and heartbeat are single atomic
         * words, so a reader can still judge whether its owner is alive (and reclaim it if not). */
        for (uint32_t attempt = 0; attempt <= retries && !ok; attempt++) {
            uint32_t before = ld32(&s->seq);
            copy_words((volatile uint32_t *)(void *)dst, (const volatile uint32_t *)(const void *)s, GS_SLOT_SIZE / 4);
            /* The heartbeat is stored outside the seq bracket: take it as one 64-bit word. */
            int64_t heartbeat = ld64(&s->heartbeat_us);
            memcpy(dst + offsetof(gs_slot, heartbeat_us), &heartbeat, sizeof heartbeat);
            fence();
            ok = (before & 1u) == 0 && ld32(&s->seq) == before;
        }
        if (!ok) torn |= 1u << i;
    }
    if (torn_mask) *torn_mask = torn;
    return GS_OK;
}

/* Begin/end a seq-bracketed update. A seq left odd by a crashed owner is rounded up first so the
 * bracket stays well-formed. */
static uint32_t seq_begin(volatile gs_slot *s) {
    uint32_t v = ld32(&s->seq);
    if (v & 1u) v++;
    st32(&s->seq, v + 1u);
    fence();
    return v;
}

static void seq_end(volatile gs_slot *s, uint32_t v) {
    fence();
    st32(&s->seq, v + 2u);
}

static void write_name(volatile gs_slot *s, const char *name) {
    size_t n = name ? strlen(name) : 0;
    if (n > GS_NAME_SIZE - 1) {
        n = GS_NAME_SIZE - 1; /* always NUL-terminated */
        /* cut at a UTF-8 character boundary, not inside a character */
        while (n > 0 && ((unsigned char)name[n] & 0xC0u) == 0x80u) n--;
    }
    for (size_t i = 0; i < GS_NAME_SIZE; i++) s->name[i] = i < n ? name[i] : 0;
}

static void write_f32(volatile float *p, float v) {
    uint32_t bits;
    memcpy(&bits, &v, 4);
    *(volatile uint32_t *)(volatile void *)p = bits;
}

int32_t gs_claim(gs_segment *seg, uint32_t slot, uint32_t expected_pid, int64_t expected_heartbeat_us,
                 uint32_t pid, uint32_t owner_pid, int64_t boot_us, float weight, uint32_t active,
                 const char *name, int64_t now_us) {
    if (!writable_slot(seg, slot)) return seg != NULL && seg->readonly ? GS_ERR_READONLY : GS_ERR_ARG;
    if (pid == 0 || pid == expected_pid) return GS_ERR_ARG;
    volatile gs_slot *s = slot_at(seg, slot);
    /* A dead slot is only taken while its heartbeat is still the one judged dead. */
    if (expected_pid != 0 && ld64(&s->heartbeat_us) != expected_heartbeat_us) return GS_LOST;
    if (!cas32(&s->pid, expected_pid, pid)) return GS_LOST;
    /* Heartbeat first, so another joiner does not judge the fresh claim dead. */
    st64(&s->heartbeat_us, now_us);
    uint32_t v = seq_begin(s);
    st64(&s->boot_us, boot_us);
    write_f32(&s->weight, weight);
    s->active = active ? 1u : 0u;
    s->busy_ppm = 0;
    s->owner_pid = owner_pid;
    write_name(s, name);
    seq_end(s, v);
    return GS_OK;
}

static int owns(volatile gs_slot *s, uint32_t pid, int64_t boot_us) {
    return ld32(&s->pid) == pid && ld64(&s->boot_us) == boot_us;
}

int32_t gs_heartbeat(gs_segment *seg, uint32_t slot, uint32_t pid, int64_t boot_us, int64_t now_us) {
    if (!writable_slot(seg, slot)) return seg != NULL && seg->readonly ? GS_ERR_READONLY : GS_ERR_ARG;
    volatile gs_slot *s = slot_at(seg, slot);
    if (!owns(s, pid, boot_us)) return GS_LOST;
    st64(&s->heartbeat_us, now_us);
    return GS_OK;
}

int32_t gs_update(gs_segment *seg, uint32_t slot, uint32_t pid, int64_t boot_us, float weight,
                  uint32_t active, uint32_t busy_ppm, uint32_t owner_pid, const char *name) {
    if (!writable_slot(seg, slot)) return seg != NULL && seg->readonly ? GS_ERR_READONLY : GS_ERR_ARG;
    volatile gs_slot *s = slot_at(seg, slot);
    if (!owns(s, pid, boot_us)) return GS_LOST;
    uint32_t v = seq_begin(s);
    write_f32(&s->weight, weight);
    s->active = active ? 1u : 0u;
    s->busy_ppm = busy_ppm > 1000000u ? 1000000u : busy_ppm;
    s->owner_pid = owner_pid;
    if (name != NULL) write_name(s, name);
    seq_end(s, v);
    return GS_OK;
}

int32_t gs_release(gs_segment *seg, uint32_t slot, uint32_t pid, int64_t boot_us) {
    if (!writable_slot(seg, slot)) return seg != NULL && seg->readonly ? GS_ERR_READONLY : GS_ERR_ARG;
    volatile gs_slot *s = slot_at(seg, slot);
    if (!owns(s, pid, boot_us)) return GS_LOST;
    uint32_t v = seq_begin(s);
    st64(&s->boot_us, 0);
    write_f32(&s->weight, 0.0f);
    s->active = 0;
    s->busy_ppm = 0;
    s->owner_pid = 0;
    write_name(s, NULL);
    st64(&s->heartbeat_us, 0);
    seq_end(s, v);
    return cas32(&s->pid, pid, 0) ? GS_OK : GS_LOST;
}
