/** Compiles a C program against native/gpushare.h and checks that the C compiler's offsets equal
 *  the TypeScript codec's: the two sides of the ABI cannot drift apart. */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { HEADER_OFFSET, HEADER_SIZE, NAME_SIZE, SEGMENT_SIZE, SLOT_COUNT, SLOT_OFFSET, SLOT_SIZE, VERSION } from '../../electron/core/registry/abi.js';

const nativeDir = join(import.meta.dirname, '..', '..', 'native');

const PROGRAM = `
#include <stdio.h>
#include "gpushare.h"
#define F(s, f) printf("\\"%s.%s\\": %zu,\\n", #s, #f, offsetof(s, f))
int main(void) {
  printf("{\\n");
  F(gs_header, magic); F(gs_header, version); F(gs_header, slot_count);
  F(gs_slot, pid); F(gs_slot, seq); F(gs_slot, boot_us); F(gs_slot, weight); F(gs_slot, active);
  F(gs_slot, heartbeat_us); F(gs_slot, busy_ppm); F(gs_slot, name); F(gs_slot, owner_pid);
  printf("\\"sizeof.header\\": %zu,\\n", sizeof(gs_header));
  printf("\\"sizeof.slot\\": %zu,\\n", sizeof(gs_slot));
  printf("\\"sizeof.name\\": %zu,\\n", sizeof(((gs_slot *)0)->name));
  printf("\\"layout.slots\\": %zu,\\n", offsetof(gs_segment_layout, slots));
  printf("\\"const.version\\": %u,\\n", GS_VERSION);
  printf("\\"const.slot_count\\": %u,\\n", GS_SLOT_COUNT);
  printf("\\"const.segment_size\\": %u\\n", GS_SEGMENT_SIZE);
  printf("}\\n");
  return 0;
}
`;

/** opencoti's own field list, in its order, with nothing of ours: what any C compiler makes of it
 *  is the layout real opencoti-llamafile peers write. */
const OPENCOTI = `
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
typedef struct { char magic[8]; uint32_t version; uint32_t slot_count; } oc_header;
typedef struct { uint32_t pid; int64_t boot_us; float weight; uint32_t active; int64_t heartbeat_us; uint32_t busy_ppm; char name[48]; } oc_slot;
#define F(s, f) printf("\\"%s\\": %zu,\\n", #f, offsetof(s, f))
int main(void) {
  printf("{\\n");
  F(oc_slot, pid); F(oc_slot, boot_us); F(oc_slot, weight); F(oc_slot, active); F(oc_slot, heartbeat_us); F(oc_slot, busy_ppm); F(oc_slot, name);
  printf("\\"sizeof.header\\": %zu,\\n", sizeof(oc_header));
  printf("\\"sizeof.slot\\": %zu\\n", sizeof(oc_slot));
  printf("}\\n");
  return 0;
}
`;

function compileAndRun(source: string): Record<string, number> {
  const dir = mkdtempSync(join(tmpdir(), 'gpushare-abi-'));
  try {
    writeFileSync(join(dir, 'offsets.c'), source);
    execFileSync('cc', ['-std=c11', '-Wall', '-Werror', '-I', nativeDir, '-o', join(dir, 'offsets'), join(dir, 'offsets.c')]);
    return JSON.parse(execFileSync(join(dir, 'offsets'), { encoding: 'utf8' })) as Record<string, number>;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

describe('ABI v1: C header vs TypeScript codec', () => {
  it("is opencoti's natural layout: 16-byte header, 88-byte slots, our seq and owner_pid only in its holes", () => {
    const opencoti = compileAndRun(OPENCOTI);
    expect(opencoti).toEqual({ pid: 0, boot_us: 8, weight: 16, active: 20, heartbeat_us: 24, busy_ppm: 32, name: 36, 'sizeof.header': 16, 'sizeof.slot': 88 });
    // Every field of opencoti's sits where our header and codec put it.
    for (const field of ['pid', 'boot_us', 'weight', 'active', 'heartbeat_us', 'busy_ppm', 'name'] as const) expect(SLOT_OFFSET[field], field).toBe(opencoti[field]);
    expect(HEADER_SIZE).toBe(opencoti['sizeof.header']);
    expect(SLOT_SIZE).toBe(opencoti['sizeof.slot']);
    // seq fills the hole between pid (4 bytes) and boot_us (8-aligned); owner_pid the tail padding after name.
    expect(SLOT_OFFSET.seq).toBe(4);
    expect(SLOT_OFFSET.owner_pid).toBe(36 + NAME_SIZE);
    expect(SLOT_OFFSET.owner_pid + 4).toBe(SLOT_SIZE);
    expect(HEADER_SIZE + SLOT_COUNT * SLOT_SIZE).toBe(1424);
  });

  it('has the same offsets and sizes on both sides', () => {
    const c = compileAndRun(PROGRAM);
    const ts: Record<string, number> = {
      'sizeof.header': HEADER_SIZE,
      'sizeof.slot': SLOT_SIZE,
      'sizeof.name': NAME_SIZE,
      'layout.slots': HEADER_SIZE,
      'const.version': VERSION,
      'const.slot_count': SLOT_COUNT,
      'const.segment_size': SEGMENT_SIZE,
    };
    for (const [field, offset] of Object.entries(HEADER_OFFSET)) ts[`gs_header.${field}`] = offset;
    for (const [field, offset] of Object.entries(SLOT_OFFSET)) ts[`gs_slot.${field}`] = offset;
    expect(c).toEqual(ts);
  });
});
