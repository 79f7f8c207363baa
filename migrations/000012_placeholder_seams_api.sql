-- PLACEHOLDER of branch seams-api only, so that 000013 applies on this branch (numbers must have
-- no gaps). Migration 000012 belongs to another branch: drop this file when merging that one.
SELECT 1;
