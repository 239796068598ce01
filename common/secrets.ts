/**
 * The wire shapes of credentials, keychain entries and execution variables, under the name the
 * server's services and the typed clients import them by. They are defined once, as schemas, in
 * common/contract/secrets.ts.
 */
export * from './contract/secrets.js';
