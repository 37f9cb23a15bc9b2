/** Words for what the "On this machine" list shows. */
import type { ModelSource } from '../../../electron/core/contract.js';

export const LOCAL_MODEL_SOURCE_WORDS: Readonly<Record<ModelSource, string>> = {
  ollama: 'Ollama',
  'lm-studio': 'LM Studio',
  'hugging-face': 'Hugging Face',
  'llama.cpp': 'llama.cpp',
  models: '~/models',
  added: 'added folder',
};
