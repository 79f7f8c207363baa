/**
 * The API's Fastify instance with its type provider: request parts and answers are typed from the
 * routes' JSON schemas (json-schema-to-ts), so handlers need no casts and cannot return a shape
 * the document does not describe. Answers are typed read-only so the domain's readonly arrays
 * fit, and date-time strings are Dates (the serialiser writes them as ISO strings).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { FastifyBaseLogger, FastifyInstance, FastifyTypeProvider, RawServerDefault } from 'fastify';
import type { FromSchema, JSONSchema } from 'json-schema-to-ts';

type DeepReadonly<T> = T extends Date
  ? T
  : T extends readonly (infer E)[]
    ? readonly DeepReadonly<E>[]
    : T extends object
      ? { readonly [K in keyof T]: DeepReadonly<T[K]> }
      : T;

type AnswerOptions = { deserialize: [{ pattern: { type: 'string'; format: 'date-time' }; output: Date }] };

export interface ApiTypeProvider extends FastifyTypeProvider {
  readonly validator: this['schema'] extends JSONSchema ? FromSchema<this['schema']> : unknown;
  readonly serializer: this['schema'] extends JSONSchema ? DeepReadonly<FromSchema<this['schema'], AnswerOptions>> : unknown;
}

export type ApiApp = FastifyInstance<RawServerDefault, IncomingMessage, ServerResponse, FastifyBaseLogger, ApiTypeProvider>;
