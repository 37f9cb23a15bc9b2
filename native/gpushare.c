/*
 * gpushare.c — the registry helper: map the segment, validate it, claim and release slots with
 * compare-and-swap, store heartbeats atomically, update slots under their seq, and copy
 * consistent snapshots into caller buffers. Everything else (liveness, shares, views) lives in
 * TypeScript; this file keeps to what JavaScript cannot do inside Electron's memory cage.
 *
 * Concurrency model (docs/registry.md): one writer per slot, no locks. A writer makes seq odd,
 * writes, then makes it even; readers retry a torn slot a bounded number of times, then use it as
 * read (seq sits in an alignment hole a foreign peer may fill with anything).
 *
 * A file shrinking under its mapping (another user's ftruncate in shared mode) makes the next
 * access raise SIGBUS on Linux and macOS. Every access to the mapping runs inside GUARD_BEGIN /
 * GUARD_END: a SIGBUS handler jumps back out of it, and the call returns GS_ERR_TRUNCATED instead
 * of ending the process. Windows cannot shrink a mapped file, so the guard is empty there.
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
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
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
    /* Set once an access faulted or the file's size changed: never touched again. */
    volatile int broken;
#if defined(_WIN32)
    HANDLE mapping;
#else
    int fd;                /* kept to watch the file's size */
    int64_t next_check_ns; /* CLOCK_MONOTONIC: when the size is checked again */
#endif
};

#if defined(_MSC_VER) && !defined(__clang__)
static __declspec(thread) int32_t last_os_error;
#else
static __thread int32_t last_os_error;
#endif

int32_t gs_last_os_error(void) { return last_os_error; }

/* A path the caller computed: non-empty, NUL-terminated within GS_PATH_MAX. */
static int valid_path(const char *path) {
    if (path == NULL || path[0] == 0) return 0;
    for (size_t i = 0; i < GS_PATH_MAX; i++) {
        if (path[i] == 0) return 1;
    }
    return 0;
}

/* ---- the SIGBUS guard ---- */
#if defined(_WIN32)
#define GUARD_BEGIN(flag, on_fault) do {
#define GUARD_END } while (0)
#else
#if defined(_MSC_VER)
#define GS_THREAD __declspec(thread)
#else
#define GS_THREAD __thread
#endif
/* The jump target of this thread's access in progress; NULL outside one. */
static GS_THREAD sigjmp_buf *volatile guard_target;
static struct sigaction previous_sigbus;
static pthread_once_t guard_once = PTHREAD_ONCE_INIT;

static void on_sigbus(int sig, siginfo_t *info, void *context) {
    sigjmp_buf *target = guard_target;
    if (target != NULL) {
        guard_target = NULL;
        siglongjmp(*target, 1);
    }
    /* Not one of our accesses: hand it to whoever handled it before us. */
    if (previous_sigbus.sa_flags & SA_SIGINFO) {
        previous_sigbus.sa_sigaction(sig, info, context);
    } else if (previous_sigbus.sa_handler != SIG_DFL && previous_sigbus.sa_handler != SIG_IGN) {
        previous_sigbus.sa_handler(sig);
    } else {
        /* Returning re-runs the faulting access, which now ends the process as it would have. */
        signal(sig, SIG_DFL);
    }
}

static void install_sigbus(void) {
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_sigaction = on_sigbus;
    /* SA_NODEFER: the jump out does not restore the signal mask (sigsetjmp(…, 0) saves none, so a
     * guarded call costs no system call), and SIGBUS must not stay blocked after it. */
    action.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK;
    sigemptyset(&action.sa_mask);
    sigaction(SIGBUS, &action, &previous_sigbus);
}

static void install_guard(void) { pthread_once(&guard_once, install_sigbus); }

/* Run the block with SIGBUS caught: on a fault `flag` is set to 1 and `on_fault` runs (a return
 * statement). Nothing between the two may allocate, lock or call out. */
#define GUARD_BEGIN(flag, on_fault)                \
    do {                                           \
        sigjmp_buf guard_jump_;                    \
        if (sigsetjmp(guard_jump_, 0) != 0) {      \
            (flag) = 1;                            \
            on_fault;                              \
        }                                          \
        guard_target = &guard_jump_;
#define GUARD_END         \
        guard_target = NULL; \
    } while (0)
#endif

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

int32_t gs_temp_dir(char *buf, uint32_t cap) {
    wchar_t wide[MAX_PATH + 1];
    DWORD n = GetTempPathW(MAX_PATH + 1, wide);
    if (n == 0 || n > MAX_PATH) {
        last_os_error = (int32_t)GetLastError();
        return GS_ERR_OS;
    }
    if (buf == NULL || cap == 0) return GS_ERR_ARG;
    int bytes = WideCharToMultiByte(CP_UTF8, 0, wide, (int)n, buf, (int)cap - 1, NULL, NULL);
    if (bytes <= 0) return GS_ERR_ARG;
    buf[bytes] = 0;
    return bytes;
}

static int wide_path(const char *path, wchar_t *out, int cap) {
    return MultiByteToWideChar(CP_UTF8, MB_ERR_INVALID_CHARS, path, -1, out, cap) > 0;
}

static int32_t map_win_error(DWORD e) {
    last_os_error = (int32_t)e;
    if (e == ERROR_FILE_NOT_FOUND || e == ERROR_PATH_NOT_FOUND) return GS_ERR_NOT_FOUND;
    if (e == ERROR_ACCESS_DENIED) return GS_ERR_ACCESS;
    return GS_ERR_OS;
}

/* A file of this user: its owner is our user, or the default owner our token gives the objects it
 * creates (the Administrators group for an elevated process). The Windows form of the POSIX
 * st_uid check. */
static int32_t check_owner(HANDLE file) {
    PSID owner = NULL;
    PSECURITY_DESCRIPTOR sd = NULL;
    HANDLE token = NULL;
    union { TOKEN_USER user; uint8_t bytes[256]; } user_buf;
    union { TOKEN_OWNER owner; uint8_t bytes[256]; } owner_buf;
    DWORD len = 0;
    int32_t rc = GS_ERR_OTHER_USER;
    DWORD err = GetSecurityInfo(file, SE_FILE_OBJECT, OWNER_SECURITY_INFORMATION, &owner, NULL, NULL, NULL, &sd);
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

/* What the open handle is: a plain file on disk, never a link (opened as the reparse point
 * itself), a directory, a pipe or a device. */
static int32_t check_file(HANDLE file) {
    BY_HANDLE_FILE_INFORMATION info;
    if (GetFileType(file) != FILE_TYPE_DISK) return GS_ERR_NOT_REGULAR;
    if (!GetFileInformationByHandle(file, &info)) return map_win_error(GetLastError());
    if (info.dwFileAttributes & FILE_ATTRIBUTE_REPARSE_POINT) return GS_ERR_SYMLINK;
    if (info.dwFileAttributes & FILE_ATTRIBUTE_DIRECTORY) return GS_ERR_DIRECTORY;
    return GS_OK;
}

static int64_t file_size(HANDLE file) {
    LARGE_INTEGER size;
    if (!GetFileSizeEx(file, &size)) return -1;
    return (int64_t)size.QuadPart;
}

/* Map the whole file (read-only) or its first GS_SEGMENT_SIZE bytes (read-write; a smaller file is
 * grown to it). Returns the view and its mapping, or NULL. */
static volatile uint8_t *map_file(HANDLE file, int writable, HANDLE *mapping) {
    *mapping = CreateFileMappingW(file, NULL, writable ? PAGE_READWRITE : PAGE_READONLY, 0, writable ? GS_SEGMENT_SIZE : 0, NULL);
    if (*mapping == NULL) {
        last_os_error = (int32_t)GetLastError();
        return NULL;
    }
    volatile uint8_t *view = (volatile uint8_t *)MapViewOfFile(*mapping, writable ? FILE_MAP_ALL_ACCESS : FILE_MAP_READ, 0, 0, GS_SEGMENT_SIZE);
    if (view == NULL) {
        last_os_error = (int32_t)GetLastError();
        CloseHandle(*mapping);
        *mapping = NULL;
    }
    return view;
}

int32_t gs_open(const char *path, uint32_t flags, uint32_t mode, gs_segment **out, int32_t *opened) {
    wchar_t wpath[GS_PATH_MAX];
    HANDLE file = INVALID_HANDLE_VALUE;
    HANDLE mapping = NULL;
    int was_created = 0;
    int adopt = 0;
    const int readonly = (flags & GS_OPEN_READONLY) != 0;
    const int shared = (flags & GS_OPEN_SHARED) != 0;
    const DWORD access = readonly ? GENERIC_READ : GENERIC_READ | GENERIC_WRITE;
    const DWORD sharing = FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE;
    /* FILE_FLAG_OPEN_REPARSE_POINT: a link at the path is opened as itself, never followed. */
    const DWORD attributes = FILE_ATTRIBUTE_NORMAL | FILE_FLAG_OPEN_REPARSE_POINT;
    /* The temp folder's inherited ACL limits a file to this user; a shared registry has none. */
    SECURITY_DESCRIPTOR open_sd;
    SECURITY_ATTRIBUTES open_sa;
    (void)mode;
    if (out == NULL || !valid_path(path) || !wide_path(path, wpath, (int)GS_PATH_MAX)) return GS_ERR_ARG;
    *out = NULL;
    if (opened) *opened = 0;
    if ((flags & GS_OPEN_CREATE) && !readonly) {
        SECURITY_ATTRIBUTES *security = NULL;
        if (shared && InitializeSecurityDescriptor(&open_sd, SECURITY_DESCRIPTOR_REVISION) &&
            SetSecurityDescriptorDacl(&open_sd, TRUE, NULL, FALSE)) {
            open_sa.nLength = sizeof open_sa;
            open_sa.lpSecurityDescriptor = &open_sd;
            open_sa.bInheritHandle = FALSE;
            security = &open_sa;
        }
        file = CreateFileW(wpath, access, sharing, security, CREATE_NEW, attributes, NULL);
        if (file != INVALID_HANDLE_VALUE) {
            was_created = 1;
        } else if (GetLastError() != ERROR_FILE_EXISTS) {
            return map_win_error(GetLastError());
        }
    }
    if (file == INVALID_HANDLE_VALUE) {
        file = CreateFileW(wpath, access, sharing, NULL, OPEN_EXISTING, attributes, NULL);
        if (file == INVALID_HANDLE_VALUE) return map_win_error(GetLastError());
    }
    int32_t rc = check_file(file);
    if (rc == GS_OK && !was_created && !shared) rc = check_owner(file);
    volatile uint8_t *view = NULL;
    if (rc == GS_OK && !was_created) {
        int waited = 0;
        int64_t size = file_size(file);
        for (; size == 0 && waited < INIT_WAIT_MS; waited += INIT_POLL_MS) {
            sleep_ms(INIT_POLL_MS); /* the creator has not sized it yet */
            size = file_size(file);
        }
        if (size < 0) rc = map_win_error(GetLastError());
        else if (size == 0) {
            if (readonly) rc = GS_ERR_NOT_FOUND;
            else adopt = 1; /* its creator died before sizing it: the writable mapping sizes it */
        } else if (size != (int64_t)GS_SEGMENT_SIZE) {
            rc = GS_ERR_FOREIGN_SIZE;
        } else {
            /* Validate through a read-only view first: a foreign file is never written. */
            view = map_file(file, 0, &mapping);
            if (view == NULL) {
                rc = GS_ERR_OS;
            } else {
                rc = judge_existing(view, readonly, waited, &adopt);
                if (rc != GS_OK || !readonly) {
                    UnmapViewOfFile((LPCVOID)view);
                    CloseHandle(mapping);
                    view = NULL;
                    mapping = NULL;
                }
            }
        }
    }
    if (rc == GS_OK && view == NULL) {
        view = map_file(file, 1, &mapping);
        if (view == NULL) rc = GS_ERR_OS;
    }
    if (rc != GS_OK && was_created) {
        FILE_DISPOSITION_INFO dispose = {TRUE};
        SetFileInformationByHandle(file, FileDispositionInfo, &dispose, sizeof dispose);
    }
    CloseHandle(file); /* the mapping keeps the file open */
    if (rc != GS_OK) return rc;
    if (was_created || adopt) init_header(view);
    gs_segment *seg = (gs_segment *)HeapAlloc(GetProcessHeap(), HEAP_ZERO_MEMORY, sizeof(gs_segment));
    if (seg == NULL) {
        UnmapViewOfFile((LPCVOID)view);
        CloseHandle(mapping);
        return GS_ERR_OS;
    }
    seg->base = view;
    seg->readonly = readonly;
    seg->mapping = mapping;
    if (opened) *opened = was_created ? (int32_t)GS_OPENED_CREATED : 0;
    *out = seg;
    return GS_OK;
}

void gs_close(gs_segment *seg) {
    if (seg == NULL) return;
    UnmapViewOfFile((LPCVOID)seg->base);
    CloseHandle(seg->mapping);
    HeapFree(GetProcessHeap(), 0, seg);
}

int32_t gs_unlink(const char *path) {
    wchar_t wpath[GS_PATH_MAX];
    if (!valid_path(path) || !wide_path(path, wpath, (int)GS_PATH_MAX)) return GS_ERR_ARG;
    if (!DeleteFileW(wpath)) return map_win_error(GetLastError());
    return GS_OK;
}

#else /* POSIX */

#include <stdlib.h>

int64_t gs_wall_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000LL + (int64_t)(ts.tv_nsec / 1000);
}

int32_t gs_temp_dir(char *buf, uint32_t cap) {
    const char *dir = "/tmp/";
    size_t n = strlen(dir);
    if (buf == NULL || cap <= n) return GS_ERR_ARG;
    memcpy(buf, dir, n + 1);
    return (int32_t)n;
}

static int32_t map_errno(int e) {
    last_os_error = e;
    if (e == ENOENT) return GS_ERR_NOT_FOUND;
    if (e == EACCES || e == EPERM) return GS_ERR_ACCESS;
    if (e == ELOOP) return GS_ERR_SYMLINK; /* O_NOFOLLOW met a link */
#if defined(EMLINK)
    if (e == EMLINK) return GS_ERR_SYMLINK; /* FreeBSD's answer to O_NOFOLLOW on a link */
#endif
    if (e == EISDIR) return GS_ERR_DIRECTORY;
    return GS_ERR_OS;
}

/* Never block, never follow a link: anyone may put a FIFO (whose open would block forever), a
 * directory or a link at the name, in /dev/shm and even more so in the shared /tmp of macOS. */
#define GS_SAFE_OPEN_FLAGS (O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)

/* What is at the path, judged on the open descriptor (no race with a rename): a regular file of
 * this user, or of anyone with GS_OPEN_SHARED. Anything else is refused and left as it is. */
static int32_t check_file(int fd, int shared, struct stat *st) {
    if (fstat(fd, st) != 0) return map_errno(errno);
    if (S_ISFIFO(st->st_mode)) return GS_ERR_FIFO;
    if (S_ISDIR(st->st_mode)) return GS_ERR_DIRECTORY;
    if (!S_ISREG(st->st_mode)) return GS_ERR_NOT_REGULAR;
    if (!shared && st->st_uid != geteuid()) {
        last_os_error = (int32_t)st->st_uid;
        return GS_ERR_OTHER_USER;
    }
    return GS_OK;
}

/* judge_existing and init_header on a mapping that may shrink under them. */
static int32_t judge_guarded(const volatile uint8_t *view, int readonly, int waited, int *adopt) {
    volatile int faulted = 0;
    volatile int32_t rc = GS_ERR_TRUNCATED;
    GUARD_BEGIN(faulted, return GS_ERR_TRUNCATED);
    rc = judge_existing(view, readonly, waited, adopt);
    GUARD_END;
    (void)faulted;
    return rc;
}

static int32_t init_guarded(volatile uint8_t *base) {
    volatile int faulted = 0;
    GUARD_BEGIN(faulted, return GS_ERR_TRUNCATED);
    init_header(base);
    GUARD_END;
    (void)faulted;
    return GS_OK;
}

/* Open an existing segment: check what it is, validate it read-only, then map it as asked. */
static int32_t open_existing(int fd, int readonly, int shared, volatile uint8_t **out_base, int *adopt, int *tightened) {
    struct stat st;
    int waited = 0;
    *adopt = 0;
    int32_t kind = check_file(fd, shared, &st);
    if (kind != GS_OK) return kind;
    /* Ours, and others could write it (left by a shared run, or created so by another program):
     * without shared mode it is set back to this user's alone. */
    if (!shared && (st.st_mode & 0077) != 0 && (st.st_mode & 0022) != 0) {
        if (fchmod(fd, 0600) != 0) return map_errno(errno);
        *tightened = 1;
    }
    for (;;) {
        if (fstat(fd, &st) != 0) return map_errno(errno);
        if (st.st_size != 0 || waited >= INIT_WAIT_MS) break;
        sleep_ms(INIT_POLL_MS); /* the creator has not sized it yet */
        waited += INIT_POLL_MS;
    }
    if (st.st_size == 0) {
        /* Its creator died between open and ftruncate. */
        if (readonly) return GS_ERR_NOT_FOUND;
        if (ftruncate(fd, GS_SEGMENT_SIZE) != 0) return map_errno(errno);
        if (fstat(fd, &st) != 0) return map_errno(errno);
    }
    if (st.st_size != (off_t)GS_SEGMENT_SIZE) return GS_ERR_FOREIGN_SIZE;
    volatile uint8_t *ro = (volatile uint8_t *)mmap(NULL, GS_SEGMENT_SIZE, PROT_READ, MAP_SHARED, fd, 0);
    if ((void *)ro == MAP_FAILED) return map_errno(errno);
    int32_t rc = judge_guarded(ro, readonly, waited, adopt);
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

int32_t gs_open(const char *path, uint32_t flags, uint32_t mode, gs_segment **out, int32_t *opened) {
    const int readonly = (flags & GS_OPEN_READONLY) != 0;
    const int shared = (flags & GS_OPEN_SHARED) != 0;
    int was_created = 0;
    int tightened = 0;
    int adopt = 0;
    int fd = -1;
    volatile uint8_t *base = NULL;
    if (out == NULL || !valid_path(path)) return GS_ERR_ARG;
    *out = NULL;
    if (opened) *opened = 0;
    if (mode == 0) mode = 0600;
    install_guard();
    if ((flags & GS_OPEN_CREATE) && !readonly) {
        fd = open(path, O_RDWR | O_CREAT | O_EXCL | GS_SAFE_OPEN_FLAGS, (mode_t)mode);
        if (fd >= 0) {
            was_created = 1;
        } else if (errno != EEXIST) {
            return map_errno(errno);
        }
    }
    if (fd < 0) {
        fd = open(path, (readonly ? O_RDONLY : O_RDWR) | GS_SAFE_OPEN_FLAGS, 0);
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
        }
        if (rc != GS_OK) unlink(path);
    } else {
        rc = open_existing(fd, readonly, shared, &base, &adopt, &tightened);
    }
    if (rc != GS_OK) {
        close(fd);
        return rc;
    }
    if ((was_created || adopt) && init_guarded(base) != GS_OK) {
        munmap((void *)base, GS_SEGMENT_SIZE);
        close(fd);
        return GS_ERR_TRUNCATED;
    }
    gs_segment *seg = (gs_segment *)calloc(1, sizeof(gs_segment));
    if (seg == NULL) {
        munmap((void *)base, GS_SEGMENT_SIZE);
        close(fd);
        return map_errno(ENOMEM);
    }
    seg->base = base;
    seg->readonly = readonly;
    seg->fd = fd; /* kept: its size is watched (size_changed) */
    if (opened) *opened = (was_created ? (int32_t)GS_OPENED_CREATED : 0) | (tightened ? (int32_t)GS_OPENED_TIGHTENED : 0);
    *out = seg;
    return GS_OK;
}

void gs_close(gs_segment *seg) {
    if (seg == NULL) return;
    munmap((void *)seg->base, GS_SEGMENT_SIZE);
    close(seg->fd);
    free(seg);
}

int32_t gs_unlink(const char *path) {
    if (!valid_path(path)) return GS_ERR_ARG;
    if (unlink(path) != 0) return map_errno(errno);
    return GS_OK;
}

#endif

/* ---- the file's size, watched ---- */
#if defined(_WIN32)
/* A mapped file cannot be truncated on Windows (ERROR_USER_MAPPED_FILE). */
static int size_changed(gs_segment *seg) { (void)seg; return 0; }
#else
/* How often the file's size is checked: a file cut to a size inside the mapping's page raises no
 * SIGBUS (the rest of the page reads as zeros and writes there are lost), so a shrink is also
 * noticed by fstat, at most this long after it. Cheap between checks: one coarse clock read. */
#define SIZE_CHECK_NS 100000000LL
#if defined(CLOCK_MONOTONIC_COARSE)
#define GS_CHECK_CLOCK CLOCK_MONOTONIC_COARSE
#else
#define GS_CHECK_CLOCK CLOCK_MONOTONIC
#endif
static int size_changed(gs_segment *seg) {
    struct timespec ts;
    struct stat st;
    clock_gettime(GS_CHECK_CLOCK, &ts);
    int64_t now = (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
    if (now < seg->next_check_ns) return 0;
    seg->next_check_ns = now + SIZE_CHECK_NS;
    if (fstat(seg->fd, &st) != 0 || st.st_size != (off_t)GS_SEGMENT_SIZE) {
        seg->broken = 1;
        return 1;
    }
    return 0;
}
#endif

/* ---- slots: the same on every platform ---- */

static volatile gs_slot *slot_at(gs_segment *seg, uint32_t i) {
    return (volatile gs_slot *)(seg->base + GS_HEADER_SIZE + (size_t)i * GS_SLOT_SIZE);
}

/* Whether a write to `slot` may start: GS_OK, or why not (a bad argument, a read-only handle, a
 * segment already broken or whose file changed size since the last check). Every slot write asks
 * this first. */
static int32_t slot_write_check(gs_segment *seg, uint32_t slot) {
    if (seg == NULL) return GS_ERR_ARG;
    if (seg->broken) return GS_ERR_TRUNCATED;
    if (seg->readonly) return GS_ERR_READONLY;
    if (slot >= GS_SLOT_COUNT) return GS_ERR_ARG;
    return size_changed(seg) ? GS_ERR_TRUNCATED : GS_OK;
}

static void copy_words(volatile uint32_t *dst, const volatile uint32_t *src, size_t words) {
    for (size_t i = 0; i < words; i++) dst[i] = src[i];
}

int32_t gs_snapshot(gs_segment *seg, uint8_t *buf, uint32_t len, uint32_t retries, uint32_t *torn_mask) {
    uint32_t torn = 0;
    if (seg == NULL || buf == NULL || len < GS_SEGMENT_SIZE) return GS_ERR_ARG;
    if (seg->broken || size_changed(seg)) return GS_ERR_TRUNCATED;
    memset(buf + GS_HEADER_SIZE + GS_SLOT_COUNT * GS_SLOT_SIZE, 0,
           GS_SEGMENT_SIZE - GS_HEADER_SIZE - GS_SLOT_COUNT * GS_SLOT_SIZE);
    GUARD_BEGIN(seg->broken, return GS_ERR_TRUNCATED);
    fence();
    copy_words((volatile uint32_t *)(void *)buf, (const volatile uint32_t *)(const void *)seg->base, GS_HEADER_SIZE / 4);
    for (uint32_t i = 0; i < GS_SLOT_COUNT; i++) {
        volatile gs_slot *s = slot_at(seg, i);
        uint8_t *dst = buf + GS_HEADER_SIZE + (size_t)i * GS_SLOT_SIZE;
        uint32_t previous[GS_SLOT_SIZE / 4];
        int ok = 0;
        /* seq is a hint: a peer that has none may leave an odd value or garbage in its hole, so a
         * copy equal to the one before it is consistent too. A slot still torn after the retries
         * keeps the bytes of its last copy, to be used as read. */
        for (uint32_t attempt = 0; attempt <= retries && !ok; attempt++) {
            uint32_t before = ld32(&s->seq);
            copy_words((volatile uint32_t *)(void *)dst, (const volatile uint32_t *)(const void *)s, GS_SLOT_SIZE / 4);
            /* The heartbeat is stored outside the seq bracket: take it as one 64-bit word. */
            int64_t heartbeat = ld64(&s->heartbeat_us);
            memcpy(dst + offsetof(gs_slot, heartbeat_us), &heartbeat, sizeof heartbeat);
            fence();
            ok = ((before & 1u) == 0 && ld32(&s->seq) == before) ||
                 (attempt > 0 && memcmp(previous, dst, GS_SLOT_SIZE) == 0);
            if (!ok) memcpy(previous, dst, GS_SLOT_SIZE);
        }
        if (!ok) torn |= 1u << i;
    }
    GUARD_END;
    if (torn_mask) *torn_mask = torn;
    return GS_OK;
}

/* Begin/end a seq-bracketed update. A seq left odd by a crashed owner (or by a peer that writes
 * no seq) is rounded up first so the bracket stays well-formed. */
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

/* owner_pid 0 means "pid itself": a peer that owns its own slot leaves the hole zero. */
static uint32_t stored_owner(uint32_t pid, uint32_t owner_pid) { return owner_pid == pid ? 0u : owner_pid; }

int32_t gs_claim(gs_segment *seg, uint32_t slot, uint32_t expected_pid, int64_t expected_heartbeat_us,
                 uint32_t pid, uint32_t owner_pid, int64_t boot_us, float weight, uint32_t active,
                 const char *name, int64_t now_us) {
    int32_t refused = slot_write_check(seg, slot);
    if (refused != GS_OK) return refused;
    if (pid == 0 || pid == expected_pid) return GS_ERR_ARG;
    volatile gs_slot *s = slot_at(seg, slot);
    volatile int32_t rc = GS_OK; /* volatile: live across the guard's sigsetjmp */
    GUARD_BEGIN(seg->broken, return GS_ERR_TRUNCATED);
    /* A dead slot is only taken while its heartbeat is still the one judged dead. */
    if (expected_pid != 0 && ld64(&s->heartbeat_us) != expected_heartbeat_us) {
        rc = GS_LOST;
    } else if (!cas32(&s->pid, expected_pid, pid)) {
        rc = GS_LOST;
    } else {
        /* Heartbeat first, so another joiner does not judge the fresh claim dead. */
        st64(&s->heartbeat_us, now_us);
        /* Both holes start afresh: whatever an earlier writer of the slot left there (an odd seq,
         * uninitialised padding) is not ours to continue. */
        st32(&s->seq, 1u);
        fence();
        st64(&s->boot_us, boot_us);
        write_f32(&s->weight, weight);
        s->active = active ? 1u : 0u;
        s->busy_ppm = 0;
        s->owner_pid = stored_owner(pid, owner_pid);
        write_name(s, name);
        seq_end(s, 0u);
    }
    GUARD_END;
    return rc;
}

static int owns(volatile gs_slot *s, uint32_t pid, int64_t boot_us) {
    return ld32(&s->pid) == pid && ld64(&s->boot_us) == boot_us;
}

int32_t gs_heartbeat(gs_segment *seg, uint32_t slot, uint32_t pid, int64_t boot_us, int64_t now_us) {
    int32_t refused = slot_write_check(seg, slot);
    if (refused != GS_OK) return refused;
    volatile gs_slot *s = slot_at(seg, slot);
    volatile int32_t rc = GS_OK; /* volatile: live across the guard's sigsetjmp */
    GUARD_BEGIN(seg->broken, return GS_ERR_TRUNCATED);
    if (!owns(s, pid, boot_us)) rc = GS_LOST;
    else st64(&s->heartbeat_us, now_us);
    GUARD_END;
    return rc;
}

int32_t gs_update(gs_segment *seg, uint32_t slot, uint32_t pid, int64_t boot_us, float weight,
                  uint32_t active, uint32_t busy_ppm, uint32_t owner_pid, const char *name) {
    int32_t refused = slot_write_check(seg, slot);
    if (refused != GS_OK) return refused;
    volatile gs_slot *s = slot_at(seg, slot);
    volatile int32_t rc = GS_OK; /* volatile: live across the guard's sigsetjmp */
    GUARD_BEGIN(seg->broken, return GS_ERR_TRUNCATED);
    if (!owns(s, pid, boot_us)) {
        rc = GS_LOST;
    } else {
        uint32_t v = seq_begin(s);
        write_f32(&s->weight, weight);
        s->active = active ? 1u : 0u;
        s->busy_ppm = busy_ppm > 1000000u ? 1000000u : busy_ppm;
        s->owner_pid = stored_owner(pid, owner_pid);
        if (name != NULL) write_name(s, name);
        seq_end(s, v);
    }
    GUARD_END;
    return rc;
}

int32_t gs_release(gs_segment *seg, uint32_t slot, uint32_t pid, int64_t boot_us) {
    int32_t refused = slot_write_check(seg, slot);
    if (refused != GS_OK) return refused;
    volatile gs_slot *s = slot_at(seg, slot);
    volatile int32_t rc = GS_OK; /* volatile: live across the guard's sigsetjmp */
    GUARD_BEGIN(seg->broken, return GS_ERR_TRUNCATED);
    if (!owns(s, pid, boot_us)) {
        rc = GS_LOST;
    } else {
        uint32_t v = seq_begin(s);
        st64(&s->boot_us, 0);
        write_f32(&s->weight, 0.0f);
        s->active = 0;
        s->busy_ppm = 0;
        s->owner_pid = 0;
        write_name(s, NULL);
        st64(&s->heartbeat_us, 0);
        seq_end(s, v);
        if (cas32(&s->pid, pid, 0)) st32(&s->seq, 0u); /* a free slot leaves both holes zero */
        else rc = GS_LOST;
    }
    GUARD_END;
    return rc;
}
