/** Windows process control through koffi: NtSuspendProcess/NtResumeProcess (ntdll) and
 *  GetProcessTimes (kernel32). Type-checked on every platform, run on Windows. */
import koffi from 'koffi';
import type { ProcessControl } from './process-control.js';

const PROCESS_SUSPEND_RESUME = 0x0800;
const PROCESS_QUERY_LIMITED_INFORMATION = 0x1000;

type Handle = { readonly __handle: unique symbol };

export function win32ProcessControl(): ProcessControl {
  const kernel32 = koffi.load('kernel32.dll');
  const ntdll = koffi.load('ntdll.dll');
  koffi.opaque('WIN_HANDLE_T');
  const OpenProcess = kernel32.func('WIN_HANDLE_T * __stdcall OpenProcess(uint32_t access, int inherit, uint32_t pid)') as (access: number, inherit: number, pid: number) => Handle | null;
  const CloseHandle = kernel32.func('int __stdcall CloseHandle(WIN_HANDLE_T *h)') as (h: Handle) => number;
  const NtSuspendProcess = ntdll.func('int32_t __stdcall NtSuspendProcess(WIN_HANDLE_T *h)') as (h: Handle) => number;
  const NtResumeProcess = ntdll.func('int32_t __stdcall NtResumeProcess(WIN_HANDLE_T *h)') as (h: Handle) => number;
  // FILETIME as one little-endian u64 of 100 ns ticks.
  const GetProcessTimes = kernel32.func('int __stdcall GetProcessTimes(WIN_HANDLE_T *h, _Out_ uint64_t *creation, _Out_ uint64_t *exit, _Out_ uint64_t *kernel, _Out_ uint64_t *user)') as (
    h: Handle, creation: [number], exit: [number], kernel: [number], user: [number]) => number;

  const withProcess = <T>(pid: number, access: number, use: (h: Handle) => T, otherwise: T): T => {
    const h = OpenProcess(access, 0, pid);
    if (h === null) return otherwise;
    try {
      return use(h);
    } finally {
      CloseHandle(h);
    }
  };

  return {
    suspend: (pid) => withProcess(pid, PROCESS_SUSPEND_RESUME, (h) => NtSuspendProcess(h) >= 0, false),
    resume: (pid) => withProcess(pid, PROCESS_SUSPEND_RESUME, (h) => NtResumeProcess(h) >= 0, false),
    cpuTimeUs: (pid) =>
      withProcess<number | null>(
        pid,
        PROCESS_QUERY_LIMITED_INFORMATION,
        (h) => {
          const creation: [number] = [0];
          const exit: [number] = [0];
          const kernel: [number] = [0];
          const user: [number] = [0];
          if (GetProcessTimes(h, creation, exit, kernel, user) === 0) return null;
          return (Number(kernel[0]) + Number(user[0])) / 10;
        },
        null,
      ),
  };
}
