/** What a caught value says: an Error's message, anything else as a string. */
export const errorText = (error: unknown): string => (error instanceof Error ? error.message : String(error));
