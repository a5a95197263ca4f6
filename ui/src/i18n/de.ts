import { en, type Catalog } from "./en";

export const de: Catalog = { ...en };
