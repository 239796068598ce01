/** Shared types of the execution core. */

