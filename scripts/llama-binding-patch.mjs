// The one change gpu-share makes to node-llama-cpp's addon before building it on this machine
// (scripts/llama-binding-build.mjs): `gpuShareDecodeStep`, a generated token's decode, sample and
// accept in one synchronous call (native/llama-binding/decode-step.cpp says why). Three insertions
// at anchors in addon/AddonContext.{h,cpp}; an anchor that is not there exactly once (another
// node-llama-cpp than the pinned one) fails the build with its name rather than patching blindly.
// Applying it twice changes nothing. A changed step goes into the files as shipped, which the first
// patch keeps beside them: patched over the last patch, the build would compile the old step under
// the new step's cache key. The engine uses the step when the loaded binding has it
// (engines/builtin/steps.ts) and node-llama-cpp's own calls otherwise (its prebuilt binaries).
import { createHash } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(fileURLToPath(new URL('..', import.meta.url)));
export const STEP_SOURCE = join(root, 'native', 'llama-binding', 'decode-step.cpp');

/** The insertions: file (under the addon folder), anchor, text put right after the anchor. */
function insertions(stepSource) {
  return [
    { file: 'AddonContext.h', anchor: '        Napi::Value SampleToken(const Napi::CallbackInfo& info);\n', text: '        Napi::Value GpuShareDecodeStep(const Napi::CallbackInfo& info);\n' },
    { file: 'AddonContext.cpp', anchor: '                InstanceMethod("sampleToken", &AddonContext::SampleToken),\n', text: '                InstanceMethod("gpuShareDecodeStep", &AddonContext::GpuShareDecodeStep),\n' },
    // The definition goes right before the class's registration (`init`), after every helper it uses.
    { file: 'AddonContext.cpp', anchor: 'void AddonContext::init(Napi::Object exports) {\n', text: stepSource, before: true },
  ];
}

/** What the patch is, for the build cache's key: a short hash of the step's source. */
export function patchId(stepSource = readFileSync(STEP_SOURCE, 'utf8')) {
  return createHash('sha256').update(stepSource).digest('hex').slice(0, 8);
}

/** The patched text of one file, or an Error naming the anchor that is missing or repeated. Pure. */
export function patchText(file, text, stepSource) {
  // Every insertion names the step: a file that has it is patched already.
  if (text.includes('GpuShareDecodeStep')) return text;
  let out = text;
  for (const insertion of insertions(stepSource).filter((entry) => entry.file === file)) {
    const count = out.split(insertion.anchor).length - 1;
    if (count !== 1) return new Error(`${file}: the anchor ${JSON.stringify(insertion.anchor.trim())} is there ${count} times, not once (node-llama-cpp changed; the patch needs updating)`);
    const at = out.indexOf(insertion.anchor);
    out = insertion.before ? `${out.slice(0, at)}${insertion.text}\n${out.slice(at)}` : `${out.slice(0, at + insertion.anchor.length)}${insertion.text}${out.slice(at + insertion.anchor.length)}`;
  }
  return out;
}

/** Beside each file it patches, the file as node-llama-cpp shipped it: a later patch (a changed step)
 *  starts from it, not from the last one's output. */
export const ORIGINAL_SUFFIX = '.gpu-share-orig';

/** Patches node-llama-cpp's addon folder in place, from the shipped files (kept beside them the first
 *  time). Throws naming what did not fit, or a file that holds an earlier patch without its original. */
export function patchAddon(addonDir, stepSource = readFileSync(STEP_SOURCE, 'utf8')) {
  const results = ['AddonContext.h', 'AddonContext.cpp'].map((file) => {
    const path = join(addonDir, file);
    const original = `${path}${ORIGINAL_SUFFIX}`;
    const current = readFileSync(path, 'utf8');
    const hasOriginal = existsSync(original);
    const shipped = hasOriginal ? readFileSync(original, 'utf8') : current;
    if (!hasOriginal && shipped.includes('GpuShareDecodeStep')) return { path, after: new Error(`${path} holds an earlier gpu-share patch and not the file as shipped (${file}${ORIGINAL_SUFFIX}): reinstall node-llama-cpp (npm ci) and build again`) };
    return { path, original, hasOriginal, shipped, current, after: patchText(file, shipped, stepSource) };
  });
  const failed = results.find((result) => result.after instanceof Error);
  if (failed !== undefined) throw failed.after;
  for (const result of results) {
    if (!result.hasOriginal) writeFileSync(result.original, result.shipped);
    if (result.after !== result.current) writeFileSync(result.path, result.after);
  }
}
