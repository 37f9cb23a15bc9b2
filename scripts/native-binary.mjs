// Tells which system and CPU a native binary is built for, from its header: ELF (Linux), PE
// (Windows) or Mach-O (macOS, thin or universal). Used by the packaging check before packing and by
// the packaging tests, so that no package carries another system's binaries.
import { openSync, readSync, closeSync } from 'node:fs';

const ELF_MACHINES = { 0x03: 'ia32', 0x28: 'arm', 0x3e: 'x64', 0xb7: 'arm64', 0xf3: 'riscv64', 0x08: 'mips', 0x15: 'ppc64', 0x102: 'loong64' };
const PE_MACHINES = { 0x014c: 'ia32', 0x8664: 'x64', 0xaa64: 'arm64', 0x01c4: 'arm' };
const MACHO_CPUS = { 0x01000007: 'x64', 0x0100000c: 'arm64', 0x00000007: 'ia32', 0x0000000c: 'arm' };

/**
 * The platform (as process.platform names it) and CPU architectures of a native binary, or null
 * when the bytes are not one. `head` needs the first 4 KiB of the file.
 * @param {Uint8Array} head
 * @returns {{ platform: 'linux' | 'win32' | 'darwin', arches: string[] } | null}
 */
export function describeBinary(head) {
  const buf = Buffer.from(head.buffer, head.byteOffset, head.byteLength);
  if (buf.length >= 20 && buf.readUInt32BE(0) === 0x7f454c46) {
    const le = buf[5] === 1;
    const machine = le ? buf.readUInt16LE(18) : buf.readUInt16BE(18);
    return { platform: 'linux', arches: [ELF_MACHINES[machine] ?? `elf-machine-0x${machine.toString(16)}`] };
  }
  if (buf.length >= 64 && buf[0] === 0x4d && buf[1] === 0x5a) {
    const pe = buf.readUInt32LE(0x3c);
    if (pe + 6 <= buf.length && buf.readUInt32BE(pe) === 0x50450000) {
      const machine = buf.readUInt16LE(pe + 4);
      return { platform: 'win32', arches: [PE_MACHINES[machine] ?? `pe-machine-0x${machine.toString(16)}`] };
    }
    return null;
  }
  if (buf.length >= 8) {
    const magicLE = buf.readUInt32LE(0);
    if (magicLE === 0xfeedfacf || magicLE === 0xfeedface) {
      const cpu = buf.readUInt32LE(4);
      return { platform: 'darwin', arches: [MACHO_CPUS[cpu] ?? `macho-cpu-0x${cpu.toString(16)}`] };
    }
    // Universal binary (big-endian header). Java class files share the magic but have a version
    // number where the count is, far above any real count of architectures.
    if (buf.readUInt32BE(0) === 0xcafebabe) {
      const count = buf.readUInt32BE(4);
      if (count === 0 || count > 16 || 8 + count * 20 > buf.length) return null;
      const arches = [];
      for (let i = 0; i < count; i++) {
        const cpu = buf.readUInt32BE(8 + i * 20);
        arches.push(MACHO_CPUS[cpu] ?? `macho-cpu-0x${cpu.toString(16)}`);
      }
      return { platform: 'darwin', arches };
    }
  }
  return null;
}

/** describeBinary() of a file on disk (reads its first 4 KiB). */
export function describeBinaryFile(path) {
  const fd = openSync(path, 'r');
  try {
    const head = Buffer.alloc(4096);
    const n = readSync(fd, head, 0, head.length, 0);
    return describeBinary(head.subarray(0, n));
  } finally {
    closeSync(fd);
  }
}
