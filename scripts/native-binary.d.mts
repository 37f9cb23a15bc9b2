export interface BinaryKind {
  platform: 'linux' | 'win32' | 'darwin';
  arches: string[];
}
export function describeBinary(head: Uint8Array): BinaryKind | null;
export function describeBinaryFile(path: string): BinaryKind | null;
