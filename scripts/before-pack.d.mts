export const HELPER_FILES: Record<'linux' | 'win32' | 'darwin', string[]>;
export const OS_NAMES: Record<'linux' | 'win32' | 'darwin', string>;
export function nativePartProblems(projectDir: string, platform: string, arch: string): string[];
export default function beforePack(context: { electronPlatformName: string; arch: number }): Promise<void>;
