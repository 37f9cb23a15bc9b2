/*
 * gpushare-watchdog — resumes paced engines when their supervisor dies.
 *
 * The process gate suspends engines (SIGSTOP / NtSuspendProcess) outside their windows. If the
 * supervisor is killed with SIGKILL it cannot resume them, so it starts this watchdog first and
 * keeps a pipe to its stdin open. The supervisor writes "+<pid>\n" for each engine it paces and
 * "-<pid>\n" when it lets one go. When the pipe reaches EOF (the supervisor exited, however it
 * died) or the watchdog gets SIGTERM/SIGINT/SIGHUP, it resumes every engine it knows and exits.
 * Resuming a process that is not stopped does nothing, so over-resuming is harmless.
 */
#if !defined(_WIN32) && !defined(_GNU_SOURCE)
#define _GNU_SOURCE
#endif
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MAX_PIDS 1024

static volatile long pids[MAX_PIDS];
static volatile int pid_count = 0;

#if defined(_WIN32)
#define WIN32_LEAN_AND_MEAN
#include <windows.h>
typedef LONG(NTAPI *NtResumeProcessFn)(HANDLE);

static void resume_all(void) {
    HMODULE ntdll = GetModuleHandleW(L"ntdll.dll");
    NtResumeProcessFn resume = ntdll ? (NtResumeProcessFn)(void *)GetProcAddress(ntdll, "NtResumeProcess") : NULL;
    if (resume == NULL) return;
    for (int i = 0; i < pid_count; i++) {
        HANDLE h = OpenProcess(PROCESS_SUSPEND_RESUME, FALSE, (DWORD)pids[i]);
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
#include <errno.h>
#include <signal.h>
#include <unistd.h>

static void resume_all(void) {
    for (int i = 0; i < pid_count; i++) {
        if (pids[i] > 0) kill((pid_t)pids[i], SIGCONT);
    }
}

static void on_signal(int sig) {
    (void)sig;
    resume_all();
    _exit(0);
}

static int read_input(char *buf, int cap) {
    for (;;) {
        ssize_t n = read(0, buf, (size_t)cap);
        if (n >= 0) return (int)n;
        if (errno != EINTR) return -1;
    }
}
#endif

static void add_pid(long pid) {
    for (int i = 0; i < pid_count; i++) {
        if (pids[i] == pid) return;
    }
    if (pid_count < MAX_PIDS) {
        pids[pid_count] = pid;
        pid_count++;
    }
}

static void remove_pid(long pid) {
    for (int i = 0; i < pid_count; i++) {
        if (pids[i] == pid) {
            pids[i] = pids[pid_count - 1];
            pid_count--;
            return;
        }
    }
}

static void handle_line(const char *line) {
    char *end = NULL;
    long pid = strtol(line + 1, &end, 10);
    if (end == line + 1 || pid <= 0) return; /* ignore what we do not understand */
    if (line[0] == '+') add_pid(pid);
    else if (line[0] == '-') remove_pid(pid);
}

int main(void) {
#if !defined(_WIN32)
    signal(SIGTERM, on_signal);
    signal(SIGINT, on_signal);
    signal(SIGHUP, on_signal);
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
    resume_all();
    return 0;
}
