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
  F(gs_header, magic); F(gs_header, version); F(gs_header, slot_count); F(gs_header, reserved);
  F(gs_slot, pid); F(gs_slot, seq); F(gs_slot, boot_us); F(gs_slot, weight); F(gs_slot, active);
  F(gs_slot, heartbeat_us); F(gs_slot, busy_ppm); F(gs_slot, owner_pid); F(gs_slot, name); F(gs_slot, reserved);
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

describe('ABI v1: C header vs TypeScript codec', () => {
  it('has the same offsets and sizes on both sides', () => {
    const dir = mkdtempSync(join(tmpdir(), 'gpushare-abi-'));
    try {
      writeFileSync(join(dir, 'offsets.c'), PROGRAM);
      execFileSync('cc', ['-std=c11', '-Wall', '-Werror', '-I', nativeDir, '-o', join(dir, 'offsets'), join(dir, 'offsets.c')]);
      const c = JSON.parse(execFileSync(join(dir, 'offsets'), { encoding: 'utf8' })) as Record<string, number>;
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
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
