/** metadata.name rules of the real server (k8s.io/apimachinery/pkg/util/validation). */
import { invalidValue, type FieldError } from './errors.js';
import type { ResourceDef } from './resources.js';

const LABEL = '[a-z0-9]([-a-z0-9]*[a-z0-9])?';
const SUBDOMAIN = `${LABEL}(\\.${LABEL})*`;

const LABEL_MSG = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end "
  + `with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '${LABEL}')`;
const SUBDOMAIN_MSG = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start "
  + `and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '${SUBDOMAIN}')`;

/** Errors of metadata.name for `def` (DNS-1123 subdomain, or label for Namespaces). */
export function nameErrors(def: ResourceDef, name: string): FieldError[] {
  const label = def.nameRule === 'label';
  const max = label ? 63 : 253;
  const errs: FieldError[] = [];
  if (name.length > max) errs.push(invalidValue('metadata.name', name, `must be no more than ${max} characters`));
  if (!new RegExp(`^${label ? LABEL : SUBDOMAIN}$`).test(name)) errs.push(invalidValue('metadata.name', name, label ? LABEL_MSG : SUBDOMAIN_MSG));
  return errs;
}
