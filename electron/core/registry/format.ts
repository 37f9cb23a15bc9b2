/** The `/gpu/peers` view as a terminal table. Pure. */
import type { GpuPeersView } from './view.js';

interface Row {
  pid: string;
  name: string;
  weight: string;
  share: string;
  busy: string;
  active: string;
  heartbeat: string;
}

const HEADINGS: Row = { pid: 'PID', name: 'NAME', weight: 'WEIGHT', share: 'SHARE', busy: 'BUSY', active: 'ACTIVE', heartbeat: 'HEARTBEAT' };
const COLUMNS = Object.keys(HEADINGS) as (keyof Row)[];
const RIGHT_ALIGNED = new Set<keyof Row>(['pid', 'weight', 'share', 'busy', 'heartbeat']);

export function formatPeersTable(view: GpuPeersView): string {
  const rows: Row[] = [];
  const entries = [
    ...(view.self ? [{ ...view.self, heartbeat_age_ms: null as number | null, self: true }] : []),
    ...view.peers.map((peer) => ({ ...peer, self: false })),
  ];
  for (const peer of entries) {
    rows.push({
      pid: String(peer.pid),
      name: peer.self ? `${peer.name} (self)` : peer.name,
      weight: String(peer.weight),
      share: `${peer.share_pct.toFixed(1)}%`,
      busy: `${peer.busy_pct.toFixed(1)}%`,
      active: peer.active ? 'yes' : 'idle',
      heartbeat: peer.heartbeat_age_ms === null ? '—' : `${peer.heartbeat_age_ms} ms`,
    });
  }
  const activeCount = entries.filter((peer) => peer.active).length;
  const title = `GPU ${view.gpu_key} · ${entries.length} ${entries.length === 1 ? 'peer' : 'peers'} alive · ${activeCount} active`;
  if (rows.length === 0) return `${title}\n(no peers alive in this GPU's registry)`;
  const width = (column: keyof Row): number => Math.max(HEADINGS[column].length, ...rows.map((row) => [...row[column]].length));
  const widths = new Map(COLUMNS.map((column) => [column, width(column)]));
  const line = (row: Row): string =>
    COLUMNS.map((column) => {
      const cell = row[column];
      const pad = ' '.repeat((widths.get(column) ?? 0) - [...cell].length);
      return RIGHT_ALIGNED.has(column) ? pad + cell : cell + pad;
    })
      .join('  ')
      .trimEnd();
  return [title, line(HEADINGS), ...rows.map(line)].join('\n');
}
