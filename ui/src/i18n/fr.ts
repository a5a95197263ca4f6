import { en, type Catalog } from "./en";

export const fr: Catalog = { ...en };
