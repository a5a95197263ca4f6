import { en, type Catalog } from "./en";

export const ja: Catalog = { ...en };
