/**
 * What every IPC call from a renderer goes through, before the core sees it: who sent it (only
 * the app's own window, on the app's own page, from its main frame), then its arguments (the
 * contract's checks: IPC arguments are as untrusted as an HTTP body), then the call, with any
 * failure turned into the contract's error body. No Electron here: ipc.ts feeds it the facts.
 */
import {
  ApiError,
  badField,
  ENABLED,
  ENGINE_ID,
  ESTIMATE_OPTIONS,
  LAUNCH_REQUEST,
  MODEL_PATH,
  OBJECT_BODY,
  parseInput,
  POLICY_PATCH,
  PROFILE_ID,
  WEIGHT,
  type ApiErrorBody,
  type ApiMethod,
  type GpuShareApi,
  type ProfileInput,
  type ProfilePatch,
  type ShellExtras,
  type ShellMethod,
  type Verdict,
} from '../core/contract.js';
import { isAppRendererUrl, type RendererLocation } from './window-security.js';

/** What the preload gets back from every invoke: the value, or the error it rethrows. */
export type IpcReply<T = unknown> = { value: T } | ApiErrorBody;

/** The facts about a sender that the check needs (from the IPC event). */
export interface SenderFacts {
  webContentsId: number;
  /** The sending frame's URL; null when the frame is gone. */
  frameUrl: string | null;
  isMainFrame: boolean;
}

export interface TrustedRenderer {
  /** The webContents of the windows this app created. */
  webContentsIds(): ReadonlySet<number>;
  location: RendererLocation;
}

/** Why a sender is refused, or null when it is the app's own window. */
export function senderProblem(sender: SenderFacts, trusted: TrustedRenderer): string | null {
  if (!trusted.webContentsIds().has(sender.webContentsId)) return `webContents ${sender.webContentsId} is not a window of this app`;
  if (!sender.isMainFrame) return 'a subframe may not call the API';
  if (sender.frameUrl === null) return 'the sending frame is gone';
  if (!isAppRendererUrl(sender.frameUrl, trusted.location)) return `${sender.frameUrl.slice(0, 200)} is not the app's page`;
  return null;
}

/** A failure as the body the preload turns back into an ApiError. */
export function errorBody(error: unknown): ApiErrorBody {
  if (error instanceof ApiError) return error.toBody();
  return { error: { code: 'INTERNAL', message: error instanceof Error ? error.message : String(error) } };
}

/** Checks the sender first, then runs the call (which validates its arguments); never throws. */
export async function answer(sender: SenderFacts, trusted: TrustedRenderer, call: () => Promise<unknown>): Promise<IpcReply> {
  const problem = senderProblem(sender, trusted);
  if (problem !== null) return { error: { code: 'FORBIDDEN', message: `refused: ${problem}` } };
  try {
    return { value: await call() };
  } catch (error) {
    return errorBody(error);
  }
}

function takeArguments(method: string, args: readonly unknown[], count: number): void {
  if (args.length !== count) throw badField('arguments', `${method} takes ${count} argument${count === 1 ? '' : 's'}, got ${args.length}`);
}

/** Told the verdict of every plan made through IPC, by the profile asked for (plans themselves
 *  carry no profile id): the tray's Launch menu shows the last one. */
export type PlanObserver = (profileId: string, verdict: Verdict) => void;

/** One API call with its arguments checked; the core validates profile fields in depth (the same
 *  checks as its profiles file), so a profile input only has to be an object here. */
export function callApi(api: Omit<GpuShareApi, 'subscribe'>, method: ApiMethod, args: readonly unknown[], onPlan: PlanObserver = () => undefined): Promise<unknown> {
  switch (method) {
    case 'getState':
      takeArguments(method, args, 0);
      return api.getState();
    case 'plan': {
      takeArguments(method, args, 1);
      const request = parseInput(LAUNCH_REQUEST, args[0]);
      return api.plan(request).then((plan) => {
        onPlan(request.profileId, plan.verdict);
        return plan;
      });
    }
    case 'launch': {
      takeArguments(method, args, 1);
      const request = parseInput(LAUNCH_REQUEST, args[0]);
      return api.launch(request).then((outcome) => {
        onPlan(request.profileId, outcome.plan.verdict);
        return outcome;
      });
    }
    case 'stopEngine':
      takeArguments(method, args, 1);
      return api.stopEngine(parseInput(ENGINE_ID, args[0], 'id'));
    case 'killEngine':
      takeArguments(method, args, 1);
      return api.killEngine(parseInput(ENGINE_ID, args[0], 'id'));
    case 'setWeight':
      takeArguments(method, args, 2);
      return api.setWeight(parseInput(ENGINE_ID, args[0], 'id'), parseInput(WEIGHT, args[1], 'weight'));
    case 'listProfiles':
      takeArguments(method, args, 0);
      return api.listProfiles();
    case 'createProfile':
      takeArguments(method, args, 1);
      return api.createProfile(parseInput(OBJECT_BODY, args[0]) as ProfileInput);
    case 'updateProfile':
      takeArguments(method, args, 2);
      return api.updateProfile(parseInput(PROFILE_ID, args[0], 'id'), parseInput(OBJECT_BODY, args[1]) as ProfilePatch);
    case 'deleteProfile':
      takeArguments(method, args, 1);
      return api.deleteProfile(parseInput(PROFILE_ID, args[0], 'id'));
    case 'estimateModel':
      if (args.length !== 2) takeArguments(method, args, 1);
      return api.estimateModel(parseInput(MODEL_PATH, args[0], 'modelPath'), parseInput(ESTIMATE_OPTIONS, args[1] ?? {}, 'options'));
    case 'setPolicy':
      takeArguments(method, args, 1);
      return api.setPolicy(parseInput(POLICY_PATCH, args[0]));
    case 'listPlans':
      takeArguments(method, args, 0);
      return api.listPlans();
    case 'listExecutables':
      takeArguments(method, args, 0);
      return api.listExecutables();
    case 'listLocalModels':
      takeArguments(method, args, 0);
      return api.listLocalModels();
  }
}

export function callShell(shell: ShellExtras, method: ShellMethod, args: readonly unknown[]): Promise<unknown> {
  switch (method) {
    case 'pickModelFile':
      takeArguments(method, args, 0);
      return shell.pickModelFile();
    case 'openDataFolder':
      takeArguments(method, args, 0);
      return shell.openDataFolder();
    case 'getLaunchAtLogin':
      takeArguments(method, args, 0);
      return shell.getLaunchAtLogin();
    case 'setLaunchAtLogin': {
      takeArguments(method, args, 1);
      return shell.setLaunchAtLogin(parseInput(ENABLED, args[0], 'enabled'));
    }
  }
}
