-- Credential ids are JSON numbers in the API (spec "Credential": integer) and in every client, so
-- they must stay at or below 2^53 - 1 to survive JavaScript (DESIGN §3: "keep them below 2^53, or
-- send strings"). Past it two credentials answer to one number: the id a client was shown for one
-- fetches, or deletes, the other. The sequence stops there and the check refuses an explicit id
-- beyond it, so an insert fails loudly instead.
ALTER SEQUENCE credential_id_seq MAXVALUE 9007199254740991;
ALTER TABLE credential ADD CONSTRAINT credential_id_json_safe CHECK (id BETWEEN 1 AND 9007199254740991);
