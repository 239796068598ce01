/** The playbook catalog: register, read, list, versions, remove. */
import { Id, JsonObject, LimitQuery, OffsetQuery, Ref, StringEnum, Timestamp, Type, type Static } from './common.js';
import { CATALOG_LIST_LIMIT } from './limits.js';

export { CATALOG_LIST_LIMIT };

/**
 * The Kubernetes resource that owns a catalog path or a credential name (issue 14). Ownership is
 * by kind + namespace + name; `uid` is recorded so a re-created resource of the same name shows
 * as a new object when it adopts what its predecessor retained.
 */
export const ResourceOwner = Type.Object({
  kind: Type.String({ minLength: 1, maxLength: 253 }),
  namespace: Type.String({ minLength: 1, maxLength: 253 }),
  name: Type.String({ minLength: 1, maxLength: 253 }),
  uid: Type.Optional(Type.String({ maxLength: 253 })),
}, { $id: 'ResourceOwner', description: 'the Kubernetes resource that owns a catalog path or credential name; absent when written through the API' });
export type ResourceOwner = Static<typeof ResourceOwner>;

/** A problem found in a playbook: `path` is a JSON path into the document as written. */
export const PlaybookIssueView = Type.Object({
  path: Type.String({ description: 'JSON path into the document as written, e.g. workflow[3].next[0]' }),
  message: Type.String(),
  severity: StringEnum(['error', 'warning']),
}, { $id: 'PlaybookIssue' });
export type PlaybookIssueView = Static<typeof PlaybookIssueView>;

/** POST /api/catalog/playbook. */
export const RegisterPlaybookRequest = Type.Object({
  content: Type.String({ minLength: 1, description: 'playbook YAML' }),
  /** Defaults to metadata.path, else metadata.name. */
  path: Type.Optional(Type.String({ minLength: 1, maxLength: 1024, description: 'catalog path; default metadata.path, else metadata.name' })),
  /** Claims the path for this resource; 409 `owned_by_other` when someone else holds it. */
  owner: Type.Optional(Ref(ResourceOwner)),
  /**
   * With `owner`: claim the path even though it has no owner, when its latest version is this one
   * (upgrade adoption: the resource registered it before ownership existed).
   */
  adopt_version: Type.Optional(Type.Integer({
    minimum: 1,
    description: 'with owner: claim the path when it has no owner and its latest version is this one (what the resource registered before ownership existed)',
  })),
});
export type RegisterPlaybookRequest = Static<typeof RegisterPlaybookRequest>;

/** 201 when a new version was stored, 200 (created false) when identical content already was. */
export const RegisterPlaybookResponse = Type.Object({
  catalog_id: Id(),
  path: Type.String(),
  version: Type.Integer(),
  created: Type.Boolean({ description: 'false when identical content was already the latest version' }),
  warnings: Type.Array(Ref(PlaybookIssueView)),
  owner: Type.Optional(Ref(ResourceOwner)),
}, { $id: 'RegisterPlaybookResponse' });
export type RegisterPlaybookResponse = Static<typeof RegisterPlaybookResponse>;

/** GET /api/catalog/playbook/{path}[?version=]. `playbook` is the normalised document. */
export const CatalogEntryView = Type.Object({
  catalog_id: Id(),
  path: Type.String(),
  version: Type.Integer(),
  content: Type.String({ description: 'the YAML as registered' }),
  playbook: JsonObject({ description: 'the normalised playbook' }),
  created_at: Timestamp(),
  owner: Type.Optional(Ref(ResourceOwner)),
}, { $id: 'CatalogEntry' });
export type CatalogEntryView = Static<typeof CatalogEntryView>;

export const CatalogSummaryView = Type.Object({
  catalog_id: Id(),
  path: Type.String(),
  version: Type.Integer(),
  name: Type.String(),
  description: Type.Optional(Type.String()),
  created_at: Timestamp(),
}, { $id: 'CatalogSummary' });
export type CatalogSummaryView = Static<typeof CatalogSummaryView>;

/** GET /api/catalog/playbooks?prefix=&limit=&offset= — latest version of each path. */
export const PlaybookListQuery = Type.Object({
  prefix: Type.Optional(Type.String({ description: 'only paths starting with this' })),
  limit: LimitQuery(CATALOG_LIST_LIMIT),
  offset: OffsetQuery(),
});
export const PlaybookList = Type.Object({
  playbooks: Type.Array(Ref(CatalogSummaryView)),
  count: Type.Integer({ description: 'items in this page' }),
  limit: Type.Integer(),
  offset: Type.Integer(),
}, { $id: 'PlaybookList' });
export type PlaybookList = Static<typeof PlaybookList>;

/** GET /api/catalog/versions?paths=a,b: latest live version (and owner) of each known path. */
export const CatalogVersionsView = Type.Object({
  versions: Type.Array(Type.Object({ path: Type.String(), version: Type.Integer(), owner: Type.Optional(Ref(ResourceOwner)) })),
});
export type CatalogVersionsView = Static<typeof CatalogVersionsView>;

/** GET /api/catalog/versions/{path}: the live versions of one path, newest first. */
export const CatalogVersions = Type.Object({
  path: Type.String(),
  versions: Type.Array(Type.Object({ catalog_id: Id(), version: Type.Integer(), created_at: Timestamp() })),
}, { $id: 'CatalogVersions' });
export type CatalogVersions = Static<typeof CatalogVersions>;

/** DELETE /api/catalog/playbook/{path}. */
export const DeletePlaybookResponse = Type.Object({ status: StringEnum(['deleted']), path: Type.String() });
export type DeletePlaybookResponse = Static<typeof DeletePlaybookResponse>;

export const catalogSchemas = [ResourceOwner, PlaybookIssueView, RegisterPlaybookResponse, CatalogEntryView, CatalogSummaryView, PlaybookList, CatalogVersions];
