import { Type } from '@sinclair/typebox';
import { StringEnum } from '../../platform/schemas.js';
import { CAPTURE_STATUSES } from './states.js';

/** Wire shapes of sites, epochs and capture sets (DESIGN.md section 14, docs/capture-sets.md). */

export const SITE_ID = '^site_[0-9a-z]{26}$';
export const EPOCH_ID = '^epoch_[0-9a-z]{26}$';
export const CAPTURE_SET_ID = '^cs_[0-9a-z]{26}$';

const Str = Type.String();
const NullableStr = Type.Union([Type.String(), Type.Null()]);
const DateTime = Type.String({ format: 'date-time' });
const NullableDateTime = Type.Union([DateTime, Type.Null()]);
const Country = Type.String({ pattern: '^[A-Z]{2}$', description: 'ISO 3166-1 alpha-2' });
const Latitude = Type.Number({ minimum: -90, maximum: 90 });
const Longitude = Type.Number({ minimum: -180, maximum: 180 });
const Label = (max: number) => Type.String({ minLength: 1, maxLength: max });
const Status = StringEnum(CAPTURE_STATUSES);

export const SiteParams = Type.Object({ id: Type.String({ pattern: SITE_ID, description: 'site id (site_...)' }) });
export const SiteEpochParams = Type.Object({
  site_id: Type.String({ pattern: SITE_ID, description: 'site id (site_...)' }),
});
export const EpochParams = Type.Object({ id: Type.String({ pattern: EPOCH_ID, description: 'epoch id (epoch_...)' }) });
export const CaptureSetParams = Type.Object({
  id: Type.String({ pattern: CAPTURE_SET_ID, description: 'capture set id (cs_...)' }),
});

export const Paging = Type.Object({
  limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 500, default: 100 })),
  offset: Type.Optional(Type.Integer({ minimum: 0, maximum: 1_000_000, default: 0 })),
});

export const Site = Type.Object(
  {
    id: Str,
    name: Str,
    country: NullableStr,
    latitude: Type.Union([Type.Number(), Type.Null()]),
    longitude: Type.Union([Type.Number(), Type.Null()]),
    description: NullableStr,
    created_at: DateTime,
    updated_at: DateTime,
  },
  { $id: 'Site' },
);

export const SiteCreateRequest = Type.Object(
  {
    name: Label(200),
    country: Type.Optional(Type.Union([Country, Type.Null()])),
    latitude: Type.Optional(Type.Union([Latitude, Type.Null()])),
    longitude: Type.Optional(Type.Union([Longitude, Type.Null()])),
    description: Type.Optional(Type.Union([Type.String({ maxLength: 4000 }), Type.Null()])),
  },
  { $id: 'SiteCreateRequest', additionalProperties: false },
);

export const SiteUpdateRequest = Type.Object(
  {
    name: Type.Optional(Label(200)),
    country: Type.Optional(Type.Union([Country, Type.Null()])),
    latitude: Type.Optional(Type.Union([Latitude, Type.Null()])),
    longitude: Type.Optional(Type.Union([Longitude, Type.Null()])),
    description: Type.Optional(Type.Union([Type.String({ maxLength: 4000 }), Type.Null()])),
  },
  { $id: 'SiteUpdateRequest', additionalProperties: false, minProperties: 1 },
);

export const SiteList = Type.Object(
  { sites: Type.Array(Type.Ref(Site)), total: Type.Integer(), limit: Type.Integer(), offset: Type.Integer() },
  { $id: 'SiteList' },
);

export const SiteDeleted = Type.Object({ id: Str, deleted: Type.Boolean() }, { $id: 'SiteDeleted' });

export const SiteEpoch = Type.Object(
  {
    id: Str,
    site_id: Str,
    label: Str,
    captured_from: NullableDateTime,
    captured_to: NullableDateTime,
    created_at: DateTime,
  },
  { $id: 'SiteEpoch' },
);

export const SiteEpochCreateRequest = Type.Object(
  {
    label: Label(200),
    captured_from: Type.Optional(Type.Union([DateTime, Type.Null()])),
    captured_to: Type.Optional(Type.Union([DateTime, Type.Null()])),
  },
  { $id: 'SiteEpochCreateRequest', additionalProperties: false },
);

export const SiteEpochList = Type.Object(
  { epochs: Type.Array(Type.Ref(SiteEpoch)), site: Type.Ref(Site), total: Type.Integer() },
  { $id: 'SiteEpochList' },
);

export const CaptureSet = Type.Object(
  {
    id: Str,
    site_epoch_id: Str,
    source_partner_id: NullableStr,
    source_type: NullableStr,
    accuracy_profile: NullableStr,
    ingest_mode: NullableStr,
    manifest_version: Str,
    manifest_json: Type.String({
      description: 'the manifest {version, files: [{path, bytes, sha256, content_type}]}, serialised',
    }),
    status: Status,
    failure_reason: NullableStr,
    raw_bytes: Type.Integer({ format: 'int64', description: 'total bytes of the manifest files' }),
    total_files: Type.Integer(),
    created_at: DateTime,
    updated_at: DateTime,
    completed_at: NullableDateTime,
    processing_job_id: Type.Union([Str, Type.Null()], {
      description: 'the kind 8 or 10 job that processes (or last processed) the set',
    }),
    outputs: Type.Union(
      [
        Type.Array(
          Type.Object({
            path: Str,
            bytes: Type.Integer({ format: 'int64' }),
            sha256: Str,
            verification: StringEnum(['verified', 'missing', 'size_mismatch', 'hash_mismatch'] as const),
          }),
        ),
        Type.Null(),
      ],
      { description: "the processing job's outputs as checked against its output manifest (null before)" },
    ),
  },
  { $id: 'CaptureSet' },
);

export const CaptureFile = Type.Object(
  {
    path: Str,
    bytes: Type.Integer({ format: 'int64' }),
    sha256: Str,
    content_type: Str,
    bytes_received: Type.Integer({ format: 'int64', description: 'bytes stored so far' }),
    verification: StringEnum(['pending', 'verified', 'missing', 'size_mismatch', 'hash_mismatch'] as const, {
      description: 'what complete found (pending before)',
    }),
    verified_at: NullableDateTime,
  },
  { $id: 'CaptureFile' },
);

/** The manifest as a request sends it; its rules (paths, hashes) are checked in code for precise 400s. */
const ManifestInput = Type.Object(
  {},
  { additionalProperties: true, description: '{version, files: [{path, bytes, sha256, content_type}]}' },
);
const StrField = (max = 200) => Type.Optional(Type.String({ maxLength: max }));

export const CaptureSetCreateRequest = Type.Object(
  {
    site_epoch_id: Type.String({ pattern: EPOCH_ID }),
    accuracy_profile: StrField(),
    ingest_mode: StrField(),
    manifest_version: StrField(64),
    source_partner_id: StrField(),
    source_type: StrField(),
    manifest: Type.Optional(ManifestInput),
    raw_bytes: Type.Optional(
      Type.Integer({
        format: 'int64',
        minimum: 0,
        description: 'when given, must equal the sum of the manifest files',
      }),
    ),
    status: Type.Optional(Status),
    total_files: Type.Optional(
      Type.Integer({ minimum: 0, description: 'when given, must equal the number of manifest files' }),
    ),
  },
  { $id: 'CaptureSetCreateRequest', additionalProperties: false },
);

export const CaptureSetCompleteRequest = Type.Object(
  {
    manifest: Type.Optional(ManifestInput),
    raw_bytes: Type.Optional(Type.Integer({ format: 'int64', minimum: 0 })),
    status: Type.Optional(Status),
    total_files: Type.Optional(Type.Integer({ minimum: 0 })),
  },
  { $id: 'CaptureSetCompleteRequest', additionalProperties: false },
);

export const CaptureSetResponse = Type.Object(
  {
    capture_set: Type.Ref(CaptureSet),
    epoch: Type.Ref(SiteEpoch),
    site: Type.Ref(Site),
    files: Type.Array(Type.Ref(CaptureFile)),
  },
  { $id: 'CaptureSetResponse' },
);

export const CaptureSetListResponse = Type.Object(
  { capture_sets: Type.Array(Type.Ref(CaptureSet)), epoch: Type.Ref(SiteEpoch), site: Type.Ref(Site) },
  { $id: 'CaptureSetListResponse' },
);
