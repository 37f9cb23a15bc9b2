export interface PackedFile {
  /** The file in this checkout. */
  source: string;
  /** Where it ends up, relative to the app's resources folder (posix separators). */
  dest: string;
  where: 'asar' | 'unpacked' | 'resources';
  size: number;
}
export interface PackedList {
  target: string;
  files: PackedFile[];
  nodeModules: { considered: number; packed: number };
}
export const projectRoot: string;
export const TARGETS: string[];
export function loadBuilderConfig(projectDir?: string): Record<string, any>;
export function packedFiles(target: string, options?: { projectDir?: string; config?: Record<string, any> }): Promise<PackedList>;
export function extraResourceRules(target: string, options?: { projectDir?: string; config?: Record<string, any> }): Array<{ from: string; to: string; filter: string[] }>;
export function readYaml(path: string): any;
