/*
 * gpushare-watchdog — ends a paced command's process tree when its supervisor dies.
 *
 * The process gate suspends a command's tree (SIGSTOP / NtSuspendProcess) outside its windows. If
 * the supervisor (`gpu-share run`) is killed with SIGKILL it can neither resume the tree nor end
 * it, so it starts this watchdog first and keeps a pipe to its stdin open, over which it says what
 * the tree is:
 *   "+g<pgid>\n"        the command's process group (the command leads it)
 *   "+<pid> <start>\n"  a member outside the group (it left with setsid); <start> is its start time
 *                       in clock ticks (/proc/PID/stat field 22; 0 where there is none), so that a
 *                       pid re-used by someone else's process is never signalled
 *   "-g<pgid>\n", "-<pid>\n"  forget one (the tree ended, or the member did)
 * When the pipe reaches EOF (the supervisor exited, however it died) or the watchdog gets
 * SIGTERM/SIGINT/SIGHUP, it resumes everything it still knows, sends SIGTERM, waits up to the grace
 * (`--grace-ms N`, 3000 by default) for all of it to exit, and sends SIGKILL to what is left. A
 * supervisor that ends normally forgets its tree first, so that EOF then ends nothing.
 *
 * On Windows the command's job object ends the tree when the supervisor's handle to it closes
 * (kill on close): the watchdog there only resumes the processes it was told about.
 */
#if !defined(_WIN32) && !defined(_GNU_SOURCE)
#define _GNU_SOURCE
#endif
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ENTRIES 1024

typedef struct entry {
    long id;            /* a pgid (group = 1) or a pid */
    int group;
    long long start;    /* a pid's start time (ticks); 0 = not checked */
} entry;

static entry entries[MAX_ENTRIES];
static int entry_count = 0;

#if defined(_WIN32)
#define WIN32_LEAN_AND_MEAN
#include <windows.h>
typedef LONG(NTAPI *NtResumeProcessFn)(HANDLE);

static void end_all(long grace_ms) {
    (void)grace_ms; /* the job object ends the tree (kill on close) */
    HMODULE ntdll = GetModuleHandleW(L"ntdll.dll");
    NtResumeProcessFn resume = ntdll ? (NtResumeProcessFn)(void *)GetProcAddress(ntdll, "NtResumeProcess") : NULL;
    if (resume == NULL) return;
    for (int i = 0; i < entry_count; i++) {
        HANDLE h = OpenProcess(PROCESS_SUSPEND_RESUME, FALSE, (DWORD)entries[i].id);
        if (h != NULL) {
            resume(h);
            CloseHandle(h);
        }
    }
}

static int read_input(char *buf, int cap) {
    DWORD n = 0;
    if (!ReadFile(GetStdHandle(STD_INPUT_HANDLE), buf, (DWORD)cap, &n, NULL)) return -1;
    return (int)n;
}
#else
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t stop_requested = 0;

static void on_signal(int sig) {
    (void)sig;
    stop_requested = 1;
}

/* /proc/<pid>/stat: state, pgrp and start time; 0 when it cannot be read (not Linux, or gone). */
static int read_stat(long pid, char *state, long *pgrp, long long *start) {
    char path[64];
    char text[1024];
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    FILE *f = fopen(path, "r");
    if (f == NULL) return 0;
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = 0;
    char *close_paren = strrchr(text, ')');
    if (close_paren == NULL || close_paren[1] == 0) return 0;
    /* After ") ": state (field 3), ppid, pgrp (5), …, starttime (22). */
    char *p = close_paren + 2;
    *state = *p;
    int field = 3;
    while (*p && field < 22) {
        if (*p == ' ') {
            field++;
            if (field == 5) *pgrp = strtol(p + 1, NULL, 10);
            if (field == 22) *start = strtoll(p + 1, NULL, 10);
        }
        p++;
    }
    return field == 22;
}

static int have_procfs(void) {
    return access("/proc/self/stat", R_OK) == 0;
}

/* Is this entry still the process (or group) we were told about, and not a zombie? */
static int entry_alive(const entry *e) {
    if (!have_procfs()) return kill(e->group ? -(pid_t)e->id : (pid_t)e->id, 0) == 0;
    if (!e->group) {
        char state = 0;
        long pgrp = 0;
        long long start = 0;
        if (!read_stat(e->id, &state, &pgrp, &start)) return 0;
        if (e->start != 0 && start != e->start) return 0; /* the pid went to someone else */
        return state != 'Z' && state != 'X';
    }
    /* A group: any member that is not a zombie (an init that does not reap leaves zombies). */
    DIR *proc = opendir("/proc");
    if (proc == NULL) return kill(-(pid_t)e->id, 0) == 0;
    int alive = 0;
    struct dirent *d;
    while (!alive && (d = readdir(proc)) != NULL) {
        char *end = NULL;
        long pid = strtol(d->d_name, &end, 10);
        if (end == d->d_name || *end != 0) continue;
        char state = 0;
        long pgrp = 0;
        long long start = 0;
        if (read_stat(pid, &state, &pgrp, &start) && pgrp == e->id && state != 'Z' && state != 'X') alive = 1;
    }
    closedir(proc);
    return alive;
}

static void signal_entry(const entry *e, int sig) {
    if (!e->group && e->start != 0 && have_procfs() && !entry_alive(e)) return; /* never a re-used pid */
    kill(e->group ? -(pid_t)e->id : (pid_t)e->id, sig);
}

static void signal_all(int sig) {
    for (int i = 0; i < entry_count; i++) signal_entry(&entries[i], sig);
}

static int any_alive(void) {
    for (int i = 0; i < entry_count; i++) {
        if (entry_alive(&entries[i])) return 1;
    }
    return 0;
}

static void end_all(long grace_ms) {
    if (entry_count == 0) return;
    /* A stopped process acts on SIGTERM only once it runs again. */
    signal_all(SIGCONT);
    signal_all(SIGTERM);
    signal_all(SIGCONT);
    struct timespec nap = {0, 50 * 1000 * 1000};
    for (long waited = 0; waited < grace_ms; waited += 50) {
        if (!any_alive()) return;
        nanosleep(&nap, NULL);
    }
    signal_all(SIGKILL);
}

static int read_input(char *buf, int cap) {
    for (;;) {
        if (stop_requested) return -1;
        ssize_t n = read(0, buf, (size_t)cap);
        if (n >= 0) return (int)n;
        if (errno != EINTR) return -1;
    }
}
#endif

static int find_entry(long id, int group) {
    for (int i = 0; i < entry_count; i++) {
        if (entries[i].id == id && entries[i].group == group) return i;
    }
    return -1;
}

static void handle_line(const char *line) {
    const char *p = line + 1;
    int group = 0;
    if (*p == 'g') {
        group = 1;
        p++;
    }
    char *end = NULL;
    long id = strtol(p, &end, 10);
    if (end == p || id <= 0) return; /* ignore what we do not understand */
    long long start = group ? 0 : strtoll(end, NULL, 10);
    int at = find_entry(id, group);
    if (line[0] == '+' && at < 0 && entry_count < MAX_ENTRIES) {
        entries[entry_count].id = id;
        entries[entry_count].group = group;
        entries[entry_count].start = start < 0 ? 0 : start;
        entry_count++;
    } else if (line[0] == '-' && at >= 0) {
        entries[at] = entries[entry_count - 1];
        entry_count--;
    }
}

int main(int argc, char **argv) {
    long grace_ms = 3000;
    for (int i = 1; i + 1 < argc; i++) {
        if (strcmp(argv[i], "--grace-ms") == 0) grace_ms = strtol(argv[i + 1], NULL, 10);
    }
    if (grace_ms < 0) grace_ms = 0;
#if !defined(_WIN32)
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = on_signal; /* no SA_RESTART: the read returns EINTR and the loop ends */
    sigemptyset(&action.sa_mask);
    sigaction(SIGTERM, &action, NULL);
    sigaction(SIGINT, &action, NULL);
    sigaction(SIGHUP, &action, NULL);
    signal(SIGPIPE, SIG_IGN);
#endif
    char buf[512];
    char line[64];
    int len = 0;
    for (;;) {
        int n = read_input(buf, (int)sizeof buf);
        if (n <= 0) break; /* EOF: the supervisor is gone */
        for (int i = 0; i < n; i++) {
            char c = buf[i];
            if (c == '\n') {
                line[len] = 0;
                if (len > 1) handle_line(line);
                len = 0;
            } else if (len < (int)sizeof line - 1) {
                line[len++] = c;
            }
        }
    }
    end_all(grace_ms);
    return 0;
}
