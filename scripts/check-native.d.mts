export function declaredExports(header: string): string[];
