/**
 * Errors that map to HTTP answers `{error: {code, message, details?}}`. Services throw these; the
 * app's error handler renders them. Anything else is a real fault (500).
 */
export class AppError extends Error {
  constructor(
    readonly statusCode: number,
    readonly code: string,
    message: string,
    readonly details?: unknown,
  ) {
    super(message);
    this.name = 'AppError';
  }
}

export const badRequest = (message: string, details?: unknown) => new AppError(400, 'bad_request', message, details);
export const unauthorized = (message = 'missing or invalid bearer token') => new AppError(401, 'unauthorized', message);
export const notFound = (message: string, details?: unknown) => new AppError(404, 'not_found', message, details);
export const conflict = (code: string, message: string, details?: unknown) => new AppError(409, code, message, details);
export const gone = (code: string, message: string, details?: unknown) => new AppError(410, code, message, details);
export const invalidPlaybook = (message: string, problems: unknown) => new AppError(422, 'playbook_invalid', message, problems);
